// The dashboard: plain JavaScript, no build step. Every value from the store is put on the page as text
// (textContent), never as markup. Reads use the ARM API and /_emulator/dashboard/; every change is an ARM
// API call (JSON, so the service's Content-Type and Host rules protect it). With --auth-token the page asks
// for the token and keeps it in this tab's sessionStorage (never a cookie), sent as a bearer header.
'use strict';

const API = '2016-03-01';
const POLL_MS = 3000;
const PAGE = 20;
const TOKEN_KEY = 'scheduler-emulator-token';
let timer = null;
let view = { render: null };

// --- small helpers ---------------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else if (key === 'className') node.className = value;
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function time(iso) {
  // UTC on the page, the viewer's local time on hover.
  if (!iso) return el('span', { className: 'muted' }, '—');
  const date = new Date(iso);
  const utc = iso.replace('T', ' ').replace(/\.\d+/, '').replace('Z', ' UTC');
  return el('time', { datetime: iso, title: isNaN(date) ? iso : date.toLocaleString() + ' (local)' }, utc);
}

function show(message, kind) {
  const box = document.getElementById('message');
  box.textContent = message;
  box.className = 'message' + (kind === 'info' ? ' info' : '');
  box.hidden = !message;
  if (message) setTimeout(() => { if (box.textContent === message) box.hidden = true; }, 8000);
}

class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = 'Bearer ' + token;
  const init = { method, headers, credentials: 'omit', cache: 'no-store' };
  if (body !== undefined) { headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
  const response = await fetch(path, init);
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (!response.ok) {
    const error = (data && data.error) || {};
    throw new ApiError(response.status, error.code || String(response.status), error.message || response.statusText);
  }
  return data;
}

function collectionPath(s, rg, jc) {
  return '/subscriptions/' + encodeURIComponent(s) + '/resourceGroups/' + encodeURIComponent(rg) +
    '/providers/Microsoft.Scheduler/jobCollections/' + encodeURIComponent(jc);
}

function withVersion(path, extra) {
  const query = new URLSearchParams({ 'api-version': API, ...(extra || {}) });
  return path + '?' + query.toString();
}

function link(hash, text) { return el('a', { href: hash }, text); }

function hashOf(...parts) { return '#/' + parts.map(encodeURIComponent).join('/'); }

// --- the token prompt -----------------------------------------------------------------------------

function tokenPrompt(main) {
  main.replaceChildren(
    el('h1', {}, 'Sign in'),
    el('p', {}, 'This emulator requires an API token (it was started with --auth-token or --auth-jwks).'),
    el('form', {
      className: 'grid',
      onsubmit: (event) => {
        event.preventDefault();
        sessionStorage.setItem(TOKEN_KEY, event.target.elements.token.value.trim());
        route();
      },
    },
    el('label', {}, 'API token', el('input', { name: 'token', type: 'password', autocomplete: 'off', required: true })),
    el('button', { type: 'submit', className: 'primary' }, 'Use token')),
  );
}

// --- views ----------------------------------------------------------------------------------------

async function collectionsView(main) {
  const { value } = await api('GET', '/_emulator/dashboard/collections');
  const rows = value.map((c) => el('tr', {},
    el('td', {}, c.subscriptionId),
    el('td', {}, c.resourceGroup),
    el('td', {}, link(hashOf('c', c.subscriptionId, c.resourceGroup, c.name), c.name)),
    el('td', {}, c.sku),
    el('td', { className: 'state-' + c.state }, c.state),
    el('td', { className: 'num' }, c.maxJobCount == null ? String(c.jobCount) : `${c.jobCount} / ${c.maxJobCount}`),
  ));
  main.replaceChildren(
    el('h1', {}, 'Job collections'),
    value.length ? el('div', { className: 'table-wrap' }, el('table', {},
      el('caption', { className: 'muted' }, 'Every subscription and resource group with its collections'),
      el('thead', {}, el('tr', {}, ['Subscription', 'Resource group', 'Collection', 'Plan', 'State', 'Jobs / quota']
        .map((h) => el('th', { scope: 'col' }, h)))),
      el('tbody', {}, rows))) : el('p', { className: 'muted' }, 'No job collections yet. Create one with the API or an SDK.'),
  );
}

function jobForm(s, rg, jc, existing) {
  const form = el('form', {
    className: 'grid',
    'aria-label': 'Create or replace a job',
    onsubmit: async (event) => {
      event.preventDefault();
      const f = event.target.elements;
      const properties = { action: { type: 'Http', request: { uri: f.uri.value.trim(), method: f.method.value } } };
      if (f.body.value) properties.action.request.body = f.body.value;
      if (f.start.value.trim()) properties.startTime = f.start.value.trim();
      if (f.frequency.value !== 'once') {
        properties.recurrence = { frequency: f.frequency.value, interval: Number(f.interval.value) };
      }
      await save(s, rg, jc, f.name.value.trim(), properties);
    },
  },
  el('label', {}, 'Job name', el('input', { name: 'name', required: true, value: existing || '' })),
  el('label', {}, 'Target URI', el('input', { name: 'uri', required: true, placeholder: 'http://127.0.0.1:8080/hook' })),
  el('label', {}, 'Method', el('select', { name: 'method' }, ['POST', 'GET', 'PUT', 'DELETE'].map((m) => el('option', {}, m)))),
  el('label', {}, 'Body', el('input', { name: 'body' })),
  el('label', {}, 'Start time (ISO-8601, optional)', el('input', { name: 'start', placeholder: '2030-01-01T09:00:00Z' })),
  el('label', {}, 'Repeat', el('select', { name: 'frequency' },
    el('option', { value: 'once' }, 'once'), ['Minute', 'Hour', 'Day', 'Week', 'Month'].map((f) => el('option', {}, f)))),
  el('label', {}, 'Every (interval)', el('input', { name: 'interval', type: 'number', min: 1, value: 1 })),
  el('button', { type: 'submit', className: 'primary' }, 'Save job'));
  return form;
}

function jsonForm(s, rg, jc, name, properties) {
  return el('form', {
    'aria-label': 'Job definition as JSON',
    onsubmit: async (event) => {
      event.preventDefault();
      const f = event.target.elements;
      let parsed;
      try { parsed = JSON.parse(f.json.value); } catch (e) { show('The JSON is not valid: ' + e.message); return; }
      await save(s, rg, jc, f.jobname.value.trim(), parsed.properties || parsed);
    },
  },
  el('label', {}, 'Job name', el('input', { name: 'jobname', required: true, value: name || '' })),
  el('label', {}, 'Properties (JSON)', el('textarea', { name: 'json', spellcheck: 'false' },
    JSON.stringify(properties || { action: { type: 'Http', request: { uri: 'http://127.0.0.1:8080/hook', method: 'POST' } },
      recurrence: { frequency: 'Hour', interval: 1 } }, null, 2))),
  el('div', { className: 'actions' }, el('button', { type: 'submit', className: 'primary' }, 'Save JSON')));
}

async function save(s, rg, jc, name, properties) {
  if (!name) { show('A job name is needed.'); return; }
  try {
    await api('PUT', withVersion(collectionPath(s, rg, jc) + '/jobs/' + encodeURIComponent(name)), { properties });
    show(`Job ${name} saved.`, 'info');
    location.hash = hashOf('j', s, rg, jc, name);
  } catch (error) {
    show(error.message);
  }
}

async function collectionView(main, [s, rg, jc]) {
  const data = await api('GET', '/_emulator/dashboard' + collectionPath(s, rg, jc).replace('/providers/Microsoft.Scheduler', '') + '/jobs');
  const rows = data.jobs.map((j) => el('tr', {},
    el('td', {}, link(hashOf('j', s, rg, jc, j.name), j.name)),
    el('td', { className: 'state-' + j.state }, j.state),
    el('td', {}, j.schedule),
    el('td', {}, j.nextRuns.length ? j.nextRuns.map((t) => el('div', {}, time(t))) : el('span', { className: 'muted' }, '—')),
    el('td', { className: j.lastOutcome ? 'status-' + j.lastOutcome.status : 'muted' },
      j.lastOutcome ? [j.lastOutcome.status, ' ', time(j.lastOutcome.time)] : 'never run'),
    el('td', { className: 'num' }, String(j.executionCount)),
    el('td', { className: 'num hide-narrow' }, String(j.failureCount)),
    el('td', { className: 'num hide-narrow' }, String(j.faultedCount)),
  ));
  const c = data.collection;
  const existing = main.querySelector('#job-forms');
  const table = el('div', { className: 'table-wrap', id: 'jobs-table' }, data.jobs.length ? el('table', {},
    el('thead', {}, el('tr', {}, ['Job', 'State', 'Schedule', 'Next runs', 'Last outcome', 'Runs']
      .map((h) => el('th', { scope: 'col' }, h)), el('th', { scope: 'col', className: 'hide-narrow' }, 'Failures'),
      el('th', { scope: 'col', className: 'hide-narrow' }, 'Faults'))),
    el('tbody', {}, rows)) : el('p', { className: 'muted' }, 'No jobs in this collection.'));
  if (existing) { // a refresh: keep the forms the user may be typing in
    main.querySelector('#jobs-table').replaceWith(table);
    main.querySelector('#summary').textContent = summary(c);
    return;
  }
  main.replaceChildren(
    el('p', {}, link('#/', 'Collections'), ' / ', `${c.subscriptionId} / ${c.resourceGroup}`),
    el('h1', {}, c.name),
    el('p', { id: 'summary', className: 'muted' }, summary(c)),
    table,
    el('section', { id: 'job-forms' },
      el('h2', {}, 'New job'), el('div', { className: 'card' }, jobForm(s, rg, jc)),
      el('h2', {}, 'New job from JSON'), el('div', { className: 'card' }, jsonForm(s, rg, jc))),
  );
}

function summary(c) {
  return `${c.sku} plan · ${c.state} · ${c.jobCount}${c.maxJobCount == null ? '' : ' / ' + c.maxJobCount} jobs · ${c.location}`;
}

let historyState = { key: '', skip: 0, failedOnly: false };

async function jobView(main, [s, rg, jc, name]) {
  const key = [s, rg, jc, name].join('/');
  if (historyState.key !== key) historyState = { key, skip: 0, failedOnly: false };
  const base = collectionPath(s, rg, jc) + '/jobs/' + encodeURIComponent(name);
  const detail = await api('GET', '/_emulator/dashboard' + collectionPath(s, rg, jc).replace('/providers/Microsoft.Scheduler', '') +
    '/jobs/' + encodeURIComponent(name));
  const params = { $top: String(PAGE + 1), $skip: String(historyState.skip) };
  if (historyState.failedOnly) params.$filter = "status eq 'Failed'";
  const history = (await api('GET', withVersion(base + '/history', params))).value;
  const more = history.length > PAGE;
  const rows = history.slice(0, PAGE).map((h) => {
    const p = h.properties;
    const ms = p.endTime ? new Date(p.endTime) - new Date(p.startTime) : null;
    return el('tr', {},
      el('td', { className: 'status-' + p.status }, p.status),
      el('td', {}, time(p.expectedExecutionTime)),
      el('td', { className: 'hide-narrow' }, time(p.startTime)),
      el('td', { className: 'num' }, ms === null ? '—' : `${ms} ms`),
      el('td', { className: 'num hide-narrow' }, String(p.retryCount)),
      el('td', {}, String(p.actionName).toLowerCase() === 'erroraction' ? '[error action] ' : '', p.message));
  });
  const historyTable = el('div', { className: 'table-wrap', id: 'history' }, rows.length ? el('table', {},
    el('thead', {}, el('tr', {}, [['Status'], ['Expected'], ['Started', 'hide-narrow'], ['Duration'], ['Retry', 'hide-narrow'], ['Message']]
      .map(([h, narrow]) => el('th', { scope: 'col', className: narrow }, h)))),
    el('tbody', {}, rows)) : el('p', { className: 'muted' }, historyState.failedOnly ? 'No failed runs.' : 'No runs yet.'));
  const pager = el('div', { className: 'actions', id: 'pager' },
    el('button', { type: 'button', disabled: historyState.skip === 0, onclick: () => { historyState.skip = Math.max(0, historyState.skip - PAGE); refresh(); } }, 'Newer'),
    el('button', { type: 'button', disabled: !more, onclick: () => { historyState.skip += PAGE; refresh(); } }, 'Older'));
  const state = el('p', { id: 'job-state' }, 'State: ', el('strong', { className: 'state-' + detail.state }, detail.state),
    ` · ${detail.schedule} · runs ${detail.executionCount}, failures ${detail.failureCount}, faults ${detail.faultedCount}`);
  const next = el('p', { id: 'next-runs' }, 'Next runs: ', detail.nextRuns.length ? detail.nextRuns.flatMap((t) => [time(t), ' ']) : '—');
  if (main.querySelector('#job-page')?.dataset.key === key) {
    main.querySelector('#job-state').replaceWith(state);
    main.querySelector('#next-runs').replaceWith(next);
    main.querySelector('#history').replaceWith(historyTable);
    main.querySelector('#pager').replaceWith(pager);
    main.querySelector('#definition').textContent = JSON.stringify(detail.definition, null, 2);
    return;
  }
  const act = (label, work, className) => el('button', { type: 'button', className, onclick: async () => {
    try { await work(); show(`${label}: done.`, 'info'); refresh(); } catch (error) { show(error.message); }
  } }, label);
  main.replaceChildren(el('div', { id: 'job-page', 'data-key': key },
    el('p', {}, link('#/', 'Collections'), ' / ', link(hashOf('c', s, rg, jc), jc)),
    el('h1', {}, name),
    state, next,
    el('div', { className: 'actions' },
      act('Run now', () => api('POST', withVersion(base + '/run'))),
      act('Enable', () => api('PATCH', withVersion(base), { properties: { state: 'Enabled' } })),
      act('Disable', () => api('PATCH', withVersion(base), { properties: { state: 'Disabled' } })),
      el('button', { type: 'button', className: 'danger', onclick: async () => {
        if (!window.confirm(`Delete the job ${name} and its history?`)) return;
        try { await api('DELETE', withVersion(base)); show(`Job ${name} deleted.`, 'info'); location.hash = hashOf('c', s, rg, jc); } catch (error) { show(error.message); }
      } }, 'Delete')),
    el('h2', {}, 'History'),
    el('label', { className: 'inline' }, el('input', { type: 'checkbox', id: 'failed-only', checked: historyState.failedOnly,
      onchange: (event) => { historyState.failedOnly = event.target.checked; historyState.skip = 0; refresh(); } }), ' Failed only'),
    historyTable, pager,
    el('h2', {}, 'Definition'),
    el('p', { className: 'muted' }, 'Secrets are shown as ********.'),
    el('pre', { id: 'definition' }, JSON.stringify(detail.definition, null, 2)),
    el('h2', {}, 'Edit as JSON'),
    el('div', { className: 'card' }, jsonForm(s, rg, jc, name, stripStatus(detail.definition)))));
}

function stripStatus(definition) {
  const copy = JSON.parse(JSON.stringify(definition));
  delete copy.status;
  return copy;
}

function calculatorView(main) {
  if (main.querySelector('#calculator')) return;
  const output = el('div', { id: 'calc-output', 'aria-live': 'polite' });
  main.replaceChildren(el('section', { id: 'calculator' },
    el('h1', {}, 'Schedule calculator'),
    el('form', {
      onsubmit: async (event) => {
        event.preventDefault();
        const f = event.target.elements;
        let recurrence;
        try { recurrence = f.recurrence.value.trim() ? JSON.parse(f.recurrence.value) : undefined; } catch (e) { show('The recurrence is not valid JSON: ' + e.message); return; }
        const body = { count: Number(f.count.value) || 10 };
        if (recurrence) body.recurrence = recurrence;
        if (f.start.value.trim()) body.startTime = f.start.value.trim();
        try {
          const [preview, words] = await Promise.all([
            api('POST', '/_emulator/recurrence/preview', body),
            api('POST', '/_emulator/dashboard/describe', { startTime: body.startTime, recurrence }),
          ]);
          output.replaceChildren(el('p', {}, el('strong', {}, words.description)),
            el('ol', {}, preview.occurrences.map((t) => el('li', {}, time(t)))));
        } catch (error) { output.replaceChildren(); show(error.message); }
      },
    },
    el('label', {}, 'Start time (ISO-8601, optional)', el('input', { name: 'start', placeholder: '2030-01-01T09:00:00-08:00' })),
    el('label', {}, 'Recurrence (JSON)', el('textarea', { name: 'recurrence', spellcheck: 'false' },
      JSON.stringify({ frequency: 'Month', interval: 1, schedule: { monthlyOccurrences: [{ day: 'Friday', occurrence: -1 }] } }, null, 2))),
    el('label', {}, 'How many', el('input', { name: 'count', type: 'number', min: 1, max: 1000, value: 10 })),
    el('div', { className: 'actions' }, el('button', { type: 'submit', className: 'primary' }, 'Show occurrences'))),
    output));
}

// --- routing and refresh --------------------------------------------------------------------------

const ROUTES = [
  [/^#\/c\/([^/]+)\/([^/]+)\/([^/]+)$/, collectionView],
  [/^#\/j\/([^/]+)\/([^/]+)\/([^/]+)\/([^/]+)$/, jobView],
  [/^#\/calculator$/, calculatorView],
  [/^(#\/?)?$/, collectionsView],
];

async function refresh() {
  const main = document.getElementById('main');
  if (!view.render) return;
  try {
    await view.render(main, view.args);
    updateClock();
  } catch (error) {
    if (error.status === 401) { tokenPrompt(main); view.render = null; return; }
    if (error.status === 404 && !main.childElementCount) main.replaceChildren(el('p', {}, error.message));
    else show(error.message);
  }
}

async function updateClock() {
  try {
    const clock = await api('GET', '/_emulator/clock');
    const node = document.getElementById('clock');
    node.replaceChildren(clock.mode === 'virtual' ? 'Virtual time ' : 'Time ', time(clock.now));
  } catch (error) { /* the clock is a nicety */ }
}

function route() {
  const hash = location.hash;
  const main = document.getElementById('main');
  main.replaceChildren(el('p', { className: 'muted' }, 'Loading…'));
  for (const [pattern, render] of ROUTES) {
    const match = hash.match(pattern);
    if (match) {
      view = { render, args: match.slice(1).map(decodeURIComponent) };
      refresh();
      return;
    }
  }
  main.replaceChildren(el('p', {}, 'Nothing here. ', link('#/', 'Back to the collections')));
}

window.addEventListener('hashchange', route);
window.addEventListener('DOMContentLoaded', () => {
  route();
  timer = setInterval(() => { if (!document.hidden && view.render && view.render !== calculatorView) refresh(); }, POLL_MS);
});
