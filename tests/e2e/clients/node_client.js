// The JavaScript Scheduler client (npm azure-arm-scheduler 1.2.0-preview on ms-rest / ms-rest-azure 2.x),
// driven by test_client_matrix.py exactly as python_client.py drives the Python ones: a plan (JSON) on
// stdin, the SDK does what it says, and JSON of what the SDK deserialised goes to stdout in the neutral
// form (snake_case names as in the Python models, durations in seconds, date-times in POSIX seconds).
// Node must trust the emulator's certificate: the test sets NODE_EXTRA_CA_CERTS.
"use strict";

// ms-rest's own copy of moment, so that the durations it deserialises are recognised as such.
const moment = require(require.resolve("moment", { paths: [require.resolve("ms-rest")] }));
const { TokenCredentials } = require("ms-rest");
const SchedulerManagementClient = require("azure-arm-scheduler");

const DURATIONS = new Set(["retryInterval", "timeToLive"]);
const DATES = new Set(["startTime", "endTime", "expectedExecutionTime", "lastExecutionTime", "nextExecutionTime"]);

const snake = (name) => name.replace(/[A-Z]/g, (c) => "_" + c.toLowerCase());
const camel = (name) => name.replace(/_([a-z])/g, (_, c) => c.toUpperCase());

function neutral(value) {
  if (moment.isDuration(value)) return value.asMilliseconds() / 1000;
  if (value instanceof Date) return value.getTime() / 1000;
  if (Array.isArray(value)) return value.map(neutral);
  if (value && typeof value === "object") {
    const result = {};
    for (const [key, item] of Object.entries(value)) {
      // Header and custom-property dictionaries keep their own keys.
      if (item !== undefined && item !== null) result[/^[a-z]/.test(key) ? snake(key) : key] = neutral(item);
    }
    return result;
  }
  return value;
}

// Neutral → what the SDK's serialiser takes: camelCase, moment durations, Dates. Dictionaries
// (request.headers, customMessageProperties) keep their keys.
function build(value, key) {
  if (value === null || value === undefined) return value;
  if (DURATIONS.has(key)) return moment.duration(value, "seconds");
  if (DATES.has(key)) return new Date(value);
  if (Array.isArray(value)) return value.map((item) => build(item, ""));
  if (typeof value === "object") {
    const result = {};
    const dictionary = key === "headers" || key === "customMessageProperties";
    for (const [name, item] of Object.entries(value)) {
      const wire = dictionary ? name : camel(name);
      result[wire] = build(item, wire);
    }
    return result;
  }
  return value;
}

// The operation's neutral result, or {error} when the SDK threw (the matrix shows which).
async function attempt(operation) {
  try {
    return neutral(await operation());
  } catch (error) {
    return { error: String((error && error.message) || error).slice(0, 500) };
  }
}

async function pages(first, next) {
  const result = [];
  let page = await first();
  for (let i = 0; i < 1000; i++) {
    result.push([...page]);
    if (!page.nextLink) return result;
    page = await next(page.nextLink);
  }
  throw new Error("more than 1000 pages");
}

async function write(client, plan) {
  const rg = plan.resource_group;
  await client.jobCollections.createOrUpdate(rg, plan.collection, {
    location: "westus",
    properties: { sku: { name: "Standard" } },
  });
  const created = {};
  for (const [name, spec] of Object.entries(plan.jobs)) {
    created[name] = await attempt(() =>
      client.jobs.createOrUpdate(rg, plan.shared, name, { properties: build(spec, "properties") }),
    );
  }
  return { collection: await attempt(() => client.jobCollections.get(rg, plan.collection)), created };
}

async function read(client, plan) {
  const rg = plan.resource_group;
  const got = {};
  const patched = {};
  const ran = {};
  for (const name of plan.jobs) {
    got[name] = await attempt(() => client.jobs.get(rg, plan.shared, name));
    const patch = { properties: build(plan.patch[name], "properties") };
    patched[name] = await attempt(() => client.jobs.patch(rg, plan.shared, name, patch));
    ran[name] = await attempt(() => client.jobs.run(rg, plan.shared, name));
  }
  const list = await attempt(() =>
    pages(
      () => client.jobs.list(rg, plan.shared, { top: plan.top }),
      (link) => client.jobs.listNext(link),
    ),
  );
  return { get: got, patched, ran, list };
}

async function history(client, plan) {
  const rg = plan.resource_group;
  const entries = {};
  const got = {};
  for (const name of plan.jobs) {
    entries[name] = await attempt(() =>
      pages(
        () => client.jobs.listJobHistory(rg, plan.shared, name, { top: plan.top }),
        (link) => client.jobs.listJobHistoryNext(link),
      ),
    );
    got[name] = await attempt(() => client.jobs.get(rg, plan.shared, name));
  }
  return { history: entries, get: got };
}

async function main() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const plan = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  const client = new SchedulerManagementClient(new TokenCredentials("emulator"), plan.subscription, plan.url, {
    noRetryPolicy: true,
  });
  const phases = { write, read, history };
  const result = await phases[plan.phase](client, plan);
  const version = require("azure-arm-scheduler/package.json").version;
  process.stdout.write(JSON.stringify({ version, ...result }));
}

main().catch((error) => {
  process.stderr.write(String((error && error.stack) || error) + "\n");
  if (error && error.response && error.response.body) process.stderr.write(String(error.response.body) + "\n");
  process.exit(1);
});
