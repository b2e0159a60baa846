// Drives the classic (2014) npm clients against the emulator: azure-asm-scheduler@0.10.2
// (SchedulerManagementClient, CloudServiceManagementClient) and azure-scheduler@0.10.4 (SchedulerClient).
// Reads a plan on stdin: {baseUri, subscriptionId, cert, key, calls: [{client, method, args, cloudService?,
// collection?}]} and prints one JSON line: [{ok, result} | {error: {statusCode, code, message}}] per call,
// in order. Arguments {"$duration": "PT30S"} become moment durations and {"$date": "..."} Dates, as the
// clients' callers pass them.
'use strict';

const asm = require('azure-asm-scheduler');
const scheduler = require('azure-scheduler');
const moment = require('moment');

function revive(value, results) {
  if (Array.isArray(value)) return value.map((item) => revive(item, results));
  if (value && typeof value === 'object') {
    if ('$duration' in value) return moment.duration(value.$duration);
    if ('$date' in value) return new Date(value.$date);
    if ('$from' in value) { // a value read from an earlier call's result: {"$from": index, "path": [...]}
      return value.path.reduce((node, key) => (node == null ? node : node[key]), results[value.$from].result);
    }
    const out = {};
    for (const [key, item] of Object.entries(value)) out[key] = revive(item, results);
    return out;
  }
  return value;
}

function plain(value) {
  // Results hold moment durations and Dates: write them the way a caller would read them.
  return JSON.parse(JSON.stringify(value, (key, item) => {
    if (moment.isDuration(item)) return item.toISOString();
    if (key === 'statusCode' || key === 'requestId') return item;
    return item;
  }));
}

function clientFor(plan, call, credentials) {
  let client;
  if (call.client === 'management') client = asm.createSchedulerManagementClient(credentials, plan.baseUri);
  else if (call.client === 'cloud') client = asm.createCloudServiceManagementClient(credentials, plan.baseUri);
  else client = scheduler.createSchedulerClient(call.cloudService, call.collection, credentials, plan.baseUri);
  client.longRunningOperationInitialTimeout = 0; // poll at once, then every second (default 15 s / 10 s)
  client.longRunningOperationRetryTimeout = 1;
  return client;
}

function run(plan, call, credentials, results) {
  return new Promise((resolve) => {
    const client = clientFor(plan, call, credentials);
    const [group, name] = call.method.includes('.') ? call.method.split('.') : [null, call.method];
    const target = group ? client[group] : client;
    const done = (err, result) => {
      if (err) {
        resolve({ error: { statusCode: err.statusCode, code: err.code, message: err.message } });
      } else {
        resolve({ ok: true, result: plain(result) });
      }
    };
    const stream = target[name](...revive(call.args || [], results), done);
    if (call.end && stream && typeof stream.end === 'function') stream.end(); // body-less PUTs wait for end()
  });
}

async function main() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const plan = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const credentials = asm.createCertificateCloudCredentials({
    subscriptionId: plan.subscriptionId, cert: plan.cert, key: plan.key,
  });
  const results = [];
  for (const call of plan.calls) results.push(await run(plan, call, credentials, results));
  process.stdout.write(JSON.stringify(results) + '\n');
}

main().catch((error) => { process.stderr.write(String(error && error.stack || error)); process.exit(1); });
