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

// Every table of the page. Below 600 px app.css stacks each row as a card (nothing is cut off or hidden in a
// sideways scroll): each body cell carries its column's name, shown before its value. The explicit roles
// keep the table's semantics for screen readers once its parts are display: block (some browsers drop them).
function dataTable(...children) {
  const table = el('table', { role: 'table' }, ...children);
  const names = [...table.querySelectorAll('thead th')].map((th) => th.textContent);
  for (const part of table.querySelectorAll('thead, tbody')) part.setAttribute('role', 'rowgroup');
  for (const th of table.querySelectorAll('thead th')) th.setAttribute('role', 'columnheader');
  for (const row of table.querySelectorAll('tr')) {
    row.setAttribute('role', 'row');
    if (row.parentElement.tagName !== 'TBODY') continue;
    [...row.children].forEach((cell, index) => {
      cell.setAttribute('role', 'cell');
      if (names[index]) cell.dataset.label = names[index];
    });
  }
  return table;
}

// States and enums are compared case-insensitively: the API may answer 'Enabled' or 'enabled'.
function lower(value) { return String(value ?? '').toLowerCase(); }
function is(value, expected) { return lower(value) === lower(expected); }
function stateClass(prefix, value) { return value ? prefix + '-' + lower(value) : ''; }

function jobHash(ref) { return hashOf('j', ref.subscriptionId, ref.resourceGroup, ref.collection, ref.name); }
function collectionHash(ref) { return hashOf('c', ref.subscriptionId, ref.resourceGroup, ref.collection); }

// Replace a section of the page, keeping the keyboard focus on the same link or control when it is still there.
function swap(old, fresh) {
  if (!old) return;
  const active = document.activeElement;
  const inside = active && old.contains(active);
  const key = inside ? (active.getAttribute('href') || active.id || active.textContent) : null;
  old.replaceWith(fresh);
  if (!inside) return;
  const again = [...fresh.querySelectorAll('a, button, input, select, summary')]
    .find((node) => (node.getAttribute('href') || node.id || node.textContent) === key);
  if (again) again.focus();
}

function relative(iso, nowIso) {
  const seconds = Math.round((new Date(iso) - new Date(nowIso)) / 1000);
  const span = Math.abs(seconds);
  const [amount, unit] = span < 90 ? [span, 's'] : span < 5400 ? [Math.round(span / 60), 'min'] :
    span < 129600 ? [Math.round(span / 3600), 'h'] : [Math.round(span / 86400), 'd'];
  return seconds >= 0 ? `in ${amount} ${unit}` : `${amount} ${unit} ago`;
}

async function download(path, filename, type) {
  // Fetched with the token like every call, then saved from memory (a plain link could not send the header).
  const headers = {};
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = 'Bearer ' + token;
  const response = await fetch(path, { headers, credentials: 'omit', cache: 'no-store' });
  if (!response.ok) {
    let message = response.statusText;
    try { message = (await response.json()).error.message; } catch (e) { /* keep the status text */ }
    throw new ApiError(response.status, String(response.status), message);
  }
  const url = URL.createObjectURL(new Blob([await response.text()], { type }));
  const anchor = el('a', { href: url, download: filename, hidden: true });
  document.body.append(anchor);
  anchor.click();
  anchor.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

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
  main.replaceChildren(el('h1', {}, 'Job collections'), collectionsTable(value));
}

function collectionsTable(value, caption = 'Every subscription and resource group with its collections') {
  const rows = value.map((c) => el('tr', {},
    el('td', {}, c.subscriptionId),
    el('td', {}, link(hashOf('g', c.subscriptionId, c.resourceGroup), c.resourceGroup)),
    el('td', {}, link(hashOf('c', c.subscriptionId, c.resourceGroup, c.name), c.name)),
    el('td', {}, c.sku),
    el('td', { className: stateClass('state', c.state) }, c.state),
    el('td', { className: 'num' }, c.maxJobCount == null ? String(c.jobCount) : `${c.jobCount} / ${c.maxJobCount}`),
  ));
  return value.length ? el('div', { className: 'table-wrap' }, dataTable(
      el('caption', { className: 'muted' }, caption),
      el('thead', {}, el('tr', {}, ['Subscription', 'Resource group', 'Collection', 'Plan', 'State', 'Jobs / quota']
        .map((h) => el('th', { scope: 'col' }, h)))),
      el('tbody', {}, rows))) : el('p', { className: 'muted' }, 'No job collections yet. Create one with the API or an SDK.');
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
    el('td', { className: stateClass('state', j.state) }, j.state),
    el('td', {}, j.schedule),
    el('td', {}, j.nextRuns.length ? j.nextRuns.map((t) => el('div', {}, time(t))) : el('span', { className: 'muted' }, '—')),
    el('td', { className: j.lastOutcome ? stateClass('status', j.lastOutcome.status) : 'muted' },
      j.lastOutcome ? [j.lastOutcome.status, ' ', time(j.lastOutcome.time)] : 'never run'),
    el('td', { className: 'num' }, String(j.executionCount)),
    el('td', { className: 'num hide-narrow' }, String(j.failureCount)),
    el('td', { className: 'num hide-narrow' }, String(j.faultedCount)),
  ));
  const c = data.collection;
  const existing = main.querySelector('#job-forms');
  const table = el('div', { className: 'table-wrap', id: 'jobs-table' }, data.jobs.length ? dataTable(
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
    el('p', {}, link('#/collections', 'Collections'), ' / ', `${c.subscriptionId} / `, link(hashOf('g', c.subscriptionId, c.resourceGroup), c.resourceGroup)),
    el('h1', {}, c.name),
    el('p', { id: 'summary', className: 'muted' }, summary(c)),
    table,
    (data.permitted || {}).write ? el('section', { id: 'job-forms' },
      el('h2', {}, 'New job'), el('div', { className: 'card' }, jobForm(s, rg, jc)),
      el('h2', {}, 'New job from JSON'), el('div', { className: 'card' }, jsonForm(s, rg, jc)))
      : el('section', { id: 'job-forms' }, el('p', { className: 'muted' }, 'Read only: this token may not add jobs here.')),
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
      el('td', { className: stateClass('status', p.status) }, p.status),
      el('td', {}, time(p.expectedExecutionTime)),
      el('td', { className: 'hide-narrow' }, time(p.startTime)),
      el('td', { className: 'num' }, ms === null ? '—' : `${ms} ms`),
      el('td', { className: 'num hide-narrow' }, String(p.retryCount)),
      el('td', { className: 'message-cell' }, String(p.actionName).toLowerCase() === 'erroraction' ? '[error action] ' : '', p.message));
  });
  const historyTable = el('div', { className: 'table-wrap', id: 'history' }, rows.length ? dataTable(
    el('thead', {}, el('tr', {}, [['Status'], ['Expected'], ['Started', 'hide-narrow'], ['Duration'], ['Retry', 'hide-narrow'], ['Message']]
      .map(([h, narrow]) => el('th', { scope: 'col', className: narrow }, h)))),
    el('tbody', {}, rows)) : el('p', { className: 'muted' }, historyState.failedOnly ? 'No failed runs.' : 'No runs yet.'));
  const pager = el('div', { className: 'actions', id: 'pager' },
    el('button', { type: 'button', disabled: historyState.skip === 0, onclick: () => { historyState.skip = Math.max(0, historyState.skip - PAGE); refresh(); } }, 'Newer'),
    el('button', { type: 'button', disabled: !more, onclick: () => { historyState.skip += PAGE; refresh(); } }, 'Older'));
  const state = el('p', { id: 'job-state' }, 'State: ', el('strong', { className: stateClass('state', detail.state) }, detail.state),
    ` · ${detail.schedule} · runs ${detail.executionCount}, failures ${detail.failureCount}, faults ${detail.faultedCount}`);
  const next = el('p', { id: 'next-runs' }, 'Next runs: ', detail.nextRuns.length ? detail.nextRuns.flatMap((t) => [time(t), ' ']) : '—');
  const dashboardBase = '/_emulator/dashboard' + collectionPath(s, rg, jc).replace('/providers/Microsoft.Scheduler', '') +
    '/jobs/' + encodeURIComponent(name);
  const act = (label, work, className) => el('button', { type: 'button', className, onclick: async () => {
    try {
      await work();
      show(`${label}: done.`, 'info');
      await refresh();
      // The button pressed may be gone (Disable becomes Enable): keep the keyboard in the button row.
      const row = document.getElementById('job-actions');
      const counterpart = { Enable: 'Disable', Disable: 'Enable' }[label];
      if (row && !row.contains(document.activeElement)) {
        ([...row.querySelectorAll('button')].find((b) => b.textContent === counterpart) || row.querySelector('button'))?.focus();
      }
    } catch (error) { show(error.message); }
  } }, label);
  // Enable only on a disabled job, Disable only on an enabled one (states compared case-insensitively); each
  // change only where the token may make it (detail.permitted, from the caller's role assignments).
  const may = detail.permitted || {};
  const actions = el('div', { className: 'actions', id: 'job-actions', 'data-state': lower(detail.state) },
    may.run ? act('Run now', () => api('POST', withVersion(base + '/run'))) : null,
    may.write && is(detail.state, 'disabled') ? act('Enable', () => api('PATCH', withVersion(base), { properties: { state: 'Enabled' } })) : null,
    may.write && is(detail.state, 'enabled') ? act('Disable', () => api('PATCH', withVersion(base), { properties: { state: 'Disabled' } })) : null,
    may.delete ? el('button', { type: 'button', className: 'danger', onclick: async () => {
      if (!window.confirm(`Delete the job ${name} and its history?`)) return;
      try { await api('DELETE', withVersion(base)); show(`Job ${name} deleted.`, 'info'); location.hash = hashOf('c', s, rg, jc); } catch (error) { show(error.message); }
    } }, 'Delete') : null,
    may.run || may.write || may.delete ? null : el('span', { className: 'muted' }, 'Read only: this token may not change the job.'));
  const exporter = (kind, type) => el('button', { type: 'button', onclick: async () => {
    try { await download(dashboardBase + '/export?format=' + kind, `${name}-history.${kind}`, type); } catch (error) { show(error.message); }
  } }, 'Export ' + kind.toUpperCase());
  if (main.querySelector('#job-page')?.dataset.key === key) {
    if (main.querySelector('#job-actions').dataset.state !== lower(detail.state)) swap(main.querySelector('#job-actions'), actions);
    main.querySelector('#job-state').replaceWith(state);
    main.querySelector('#next-runs').replaceWith(next);
    main.querySelector('#history').replaceWith(historyTable);
    main.querySelector('#pager').replaceWith(pager);
    main.querySelector('#definition').textContent = JSON.stringify(detail.definition, null, 2);
    return;
  }
  main.replaceChildren(el('div', { id: 'job-page', 'data-key': key },
    el('p', {}, link('#/collections', 'Collections'), ' / ', link(hashOf('c', s, rg, jc), jc)),
    el('h1', {}, name),
    state, next,
    actions,
    el('h2', {}, 'History'),
    el('div', { className: 'actions', role: 'group', 'aria-label': 'Export the whole history' },
      exporter('csv', 'text/csv'), exporter('json', 'application/json')),
    el('label', { className: 'inline' }, el('input', { type: 'checkbox', id: 'failed-only', checked: historyState.failedOnly,
      onchange: (event) => { historyState.failedOnly = event.target.checked; historyState.skip = 0; refresh(); } }), ' Failed only'),
    historyTable, pager,
    el('h2', {}, 'Definition'),
    el('p', { className: 'muted' }, 'Secrets are shown as ********.'),
    el('pre', { id: 'definition' }, JSON.stringify(detail.definition, null, 2)),
    may.write ? el('h2', {}, 'Edit as JSON') : null,
    may.write ? el('div', { className: 'card' }, jsonForm(s, rg, jc, name, stripStatus(detail.definition))) : null));
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

// --- the overview (the landing page) ----------------------------------------------------------------

const STATES = ['enabled', 'disabled', 'completed', 'faulted'];
const ACTION_TYPES = ['http', 'https', 'storageQueue', 'serviceBusQueue', 'serviceBusTopic'];

function label(text) { return text.charAt(0).toUpperCase() + text.slice(1); }

function stateTotals(data) {
  // Totals by state: each a link to the job search filtered on it.
  const counts = {};
  for (const [state, count] of Object.entries(data.jobStates)) counts[lower(state)] = (counts[lower(state)] || 0) + count;
  return el('section', { id: 'totals', 'aria-labelledby': 'totals-title' },
    el('h2', { id: 'totals-title' }, 'Jobs by state'),
    el('ul', { className: 'tiles' },
      el('li', { className: 'tile' }, el('a', { href: '#/jobs', 'data-state': 'all' },
        el('span', { className: 'figure' }, String(data.jobs)), el('span', {}, `job${data.jobs === 1 ? '' : 's'} in ${data.collections} collection${data.collections === 1 ? '' : 's'}`))),
      STATES.map((state) => el('li', { className: 'tile ' + stateClass('state', state) },
        el('a', { href: '#/jobs?state=' + state, 'data-state': state },
          el('span', { className: 'figure' }, String(counts[state] || 0)), el('span', {}, label(state)))))));
}

function hhmm(iso) { return iso.slice(11, 16); }

function chart(name, caption, windowData) {
  // Stacked bars drawn as SVG by hand (no library: ~40 lines, nothing to vendor or keep up to date).
  const slots = windowData.slots;
  const width = 600; const height = 150; const top = 10; const bottom = 20; const left = 30;
  const most = Math.max(1, ...slots.map((s) => s.succeeded + s.failed));
  const step = (width - left) / slots.length;
  const scale = (height - top - bottom) / most;
  const ns = 'http://www.w3.org/2000/svg';
  const svg = (tag, attrs, ...children) => {
    const node = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    return node;
  };
  const summaryText = `${caption}: ${windowData.succeeded} succeeded, ${windowData.failed} failed`;
  const bars = slots.map((slot, index) => {
    const x = left + index * step + step * 0.15;
    const w = step * 0.7;
    const okHeight = slot.succeeded * scale;
    const badHeight = slot.failed * scale;
    const base = height - bottom;
    return svg('g', { class: 'slot', 'data-start': slot.start, 'data-succeeded': slot.succeeded, 'data-failed': slot.failed },
      svg('title', {}, `${hhmm(slot.start)} UTC: ${slot.succeeded} succeeded, ${slot.failed} failed`),
      svg('rect', { class: 'bar-ok', x, y: base - okHeight, width: w, height: okHeight }),
      svg('rect', { class: 'bar-bad', x, y: base - okHeight - badHeight, width: w, height: badHeight }),
      index % Math.ceil(slots.length / 6) === 0 ? svg('text', { x: x + w / 2, y: height - 5, 'text-anchor': 'middle' }, hhmm(slot.start)) : '');
  });
  return el('figure', { className: 'chart', id: 'chart-' + name },
    el('figcaption', {}, el('strong', {}, caption), ' ',
      el('span', { className: 'totals' }, el('span', { className: 'ok', 'data-kind': 'succeeded' }, String(windowData.succeeded)), ' succeeded, ',
        el('span', { className: 'bad', 'data-kind': 'failed' }, String(windowData.failed)), ' failed')),
    svg('svg', { viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': summaryText },
      svg('line', { x1: left, x2: width, y1: height - bottom, y2: height - bottom, class: 'axis' }),
      svg('text', { x: left - 4, y: top + 8, 'text-anchor': 'end' }, String(most)),
      ...bars));
}

function timeline(data) {
  const items = data.nextRuns.map((run) => el('li', {},
    el('span', { className: 'when' }, time(run.time), ' ', el('span', { className: 'muted' }, relative(run.time, data.now))),
    el('span', { className: 'what' }, link(jobHash(run.job), run.job.name),
      el('span', { className: 'muted' }, ` · ${run.job.collection} · ${run.job.resourceGroup}`))));
  return el('section', { id: 'next-up', 'aria-labelledby': 'next-title' },
    el('h2', { id: 'next-title' }, 'Next runs'),
    items.length ? el('ol', { className: 'timeline' }, items) : el('p', { className: 'muted' }, 'Nothing is scheduled.'));
}

function failingNow(data) {
  const rows = data.failing.map((f) => el('tr', {},
    el('td', {}, link(jobHash(f.job), f.job.name)),
    el('td', { className: 'hide-narrow' }, f.job.collection),
    el('td', { className: stateClass('state', f.state) }, f.state),
    el('td', {}, f.time ? time(f.time) : '—'),
    el('td', { className: 'message-cell' }, f.message || '')));
  return el('section', { id: 'failing', 'aria-labelledby': 'failing-title' },
    el('h2', { id: 'failing-title' }, 'Failing now'),
    rows.length ? el('div', { className: 'table-wrap' }, dataTable(
      el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, 'Job'), el('th', { scope: 'col', className: 'hide-narrow' }, 'Collection'),
        el('th', { scope: 'col' }, 'State'), el('th', { scope: 'col' }, 'Last try'), el('th', { scope: 'col' }, 'Message'))),
      el('tbody', {}, rows))) : el('p', { className: 'muted' }, 'Nothing is failing.'));
}

let lastOverview = '';

async function overviewView(main) {
  const [data, listed] = await Promise.all([
    api('GET', '/_emulator/dashboard/overview').catch((error) => { if (error.status === 403) return null; throw error; }),
    api('GET', '/_emulator/dashboard/collections')]);
  if (data === null) { // the overview's figures cover every subscription: a token without read at the root scope '/'
    main.replaceChildren(el('div', { id: 'overview' },
      el('h1', {}, 'Overview'),
      el('p', { className: 'muted', id: 'overview-scope' }, 'The figures cover every subscription; this token may read ' +
        'only some of them. ', link('#/jobs', 'Find a job')),
      el('section', { id: 'collections' }, el('h2', {}, 'Job collections'), collectionsTable(listed.value))));
    return;
  }
  const text = JSON.stringify([data, listed]);
  const sections = [
    stateTotals(data),
    el('section', { id: 'attempts', 'aria-labelledby': 'attempts-title' },
      el('h2', { id: 'attempts-title' }, 'Attempts'),
      el('div', { className: 'charts' }, chart('hour', 'Last hour', data.attempts.hour), chart('day', 'Last 24 hours', data.attempts.day))),
    timeline(data),
    failingNow(data),
    el('section', { id: 'collections' }, el('h2', {}, 'Job collections'), collectionsTable(listed.value)),
  ];
  if (main.querySelector('#overview')) {
    if (text === lastOverview) return;
    lastOverview = text;
    for (const fresh of sections) swap(main.querySelector('#' + fresh.id), fresh);
    return;
  }
  lastOverview = text;
  main.replaceChildren(el('div', { id: 'overview' },
    el('h1', {}, 'Overview'),
    el('p', { className: 'muted' }, 'Attempts are tries of a job\u2019s main action (retries included). ', link('#/jobs', 'Find a job')),
    ...sections));
}

// --- find anything ------------------------------------------------------------------------------------

function searchParams() {
  const at = location.hash.indexOf('?');
  return new URLSearchParams(at < 0 ? '' : location.hash.slice(at + 1));
}

async function searchView(main) {
  const params = searchParams();
  const query = new URLSearchParams();
  for (const [key, api_] of [['q', 'q'], ['state', 'state'], ['type', 'actionType'], ['host', 'host']]) {
    if (params.get(key)) query.set(api_, params.get(key));
  }
  const data = await api('GET', '/_emulator/dashboard/jobs?' + query.toString());
  const rows = data.value.map((j) => el('tr', {},
    el('td', {}, link(jobHash(j.job), j.job.name)),
    el('td', {}, link(collectionHash(j.job), j.job.collection), el('div', { className: 'muted' }, j.job.resourceGroup)),
    el('td', { className: stateClass('state', j.state) }, j.state),
    el('td', { className: 'hide-narrow' }, j.actionType || '—'),
    el('td', { className: 'hide-narrow target' }, j.target || '—'),
    el('td', {}, j.nextRun ? time(j.nextRun) : el('span', { className: 'muted' }, '—')),
    el('td', { className: j.lastOutcome ? stateClass('status', j.lastOutcome.status) : 'muted' }, j.lastOutcome ? j.lastOutcome.status : 'never run')));
  const results = el('div', { id: 'results' },
    el('p', { id: 'result-count', role: 'status' }, `${data.value.length}${data.truncated ? '+' : ''} job${data.value.length === 1 ? '' : 's'}`),
    rows.length ? el('div', { className: 'table-wrap' }, dataTable(
      el('thead', {}, el('tr', {}, ['Job', 'Collection', 'State'].map((h) => el('th', { scope: 'col' }, h)),
        ['Action', 'Target'].map((h) => el('th', { scope: 'col', className: 'hide-narrow' }, h)),
        ['Next run', 'Last outcome'].map((h) => el('th', { scope: 'col' }, h)))),
      el('tbody', {}, rows))) : el('p', { className: 'muted' }, 'No job matches.'));
  if (main.querySelector('#search')) { swap(main.querySelector('#results'), results); return; }
  let pending = null;
  const apply = (form) => {
    const next = new URLSearchParams();
    for (const key of ['q', 'state', 'type', 'host']) if (form.elements[key].value.trim()) next.set(key, form.elements[key].value.trim());
    const hash = '#/jobs' + (next.toString() ? '?' + next.toString() : '');
    if (hash !== location.hash) history.replaceState(null, '', hash); // shareable, survives a reload
    refresh();
  };
  const form = el('form', { className: 'grid', role: 'search', 'aria-label': 'Find jobs',
    onsubmit: (event) => { event.preventDefault(); apply(event.target); },
    oninput: (event) => { clearTimeout(pending); const f = event.currentTarget; pending = setTimeout(() => apply(f), 300); },
  },
  el('label', {}, 'Name contains', el('input', { name: 'q', type: 'search', value: params.get('q') || '', placeholder: 'job, collection or group' })),
  el('label', {}, 'State', el('select', { name: 'state' }, el('option', { value: '' }, 'any'),
    STATES.map((state) => el('option', { value: state, selected: is(params.get('state'), state) }, state)))),
  el('label', {}, 'Action type', el('select', { name: 'type' }, el('option', { value: '' }, 'any'),
    ACTION_TYPES.map((type) => el('option', { value: type, selected: is(params.get('type'), type) }, type)))),
  el('label', {}, 'Target host contains', el('input', { name: 'host', type: 'search', value: params.get('host') || '', placeholder: '127.0.0.1' })),
  el('button', { type: 'submit', className: 'primary' }, 'Search'));
  main.replaceChildren(el('section', { id: 'search' }, el('h1', {}, 'Find jobs'),
    el('p', { className: 'muted' }, 'Across every collection. The filter is part of the address: share it or reload.'),
    form, results));
}

// --- the virtual clock (in the header) ---------------------------------------------------------------

async function moveClock(body) {
  const result = document.getElementById('clock-result');
  try {
    const answer = await api('POST', '/_emulator/clock', body);
    result.replaceChildren(`Ran ${answer.occurrences} occurrence${answer.occurrences === 1 ? '' : 's'} ` +
      `(${answer.attempts} attempt${answer.attempts === 1 ? '' : 's'}, ${answer.failed} failed); the time is now `, time(answer.now), '.');
    await updateClock();
    await refresh();
  } catch (error) {
    result.textContent = '';
    show(error.message);
  }
}

function clockPanel() {
  return el('details', { id: 'clock-panel' },
    el('summary', {}, 'Virtual time ', el('span', { id: 'clock-now' })),
    el('div', { className: 'clock-forms' },
      el('form', { 'aria-label': 'Advance the virtual clock', onsubmit: (event) => {
        event.preventDefault();
        const f = event.target.elements;
        const amount = Math.floor(Number(f.amount.value));
        if (!(amount >= 1)) { show('Advance by a whole number, 1 or more.'); return; }
        const unit = f.unit.value;
        const duration = unit === 'days' ? `P${amount}D` : `PT${amount}${unit === 'hours' ? 'H' : 'M'}`;
        moveClock({ advance: duration });
      } },
      el('label', {}, 'Advance by', el('input', { name: 'amount', type: 'number', min: 1, step: 1, value: 1, required: true })),
      el('label', {}, 'Unit', el('select', { name: 'unit' }, ['minutes', 'hours', 'days'].map((u) => el('option', { value: u, selected: u === 'hours' }, u)))),
      el('button', { type: 'submit', className: 'primary' }, 'Advance')),
      el('form', { 'aria-label': 'Move the virtual clock to a time', onsubmit: (event) => {
        event.preventDefault();
        const value = event.target.elements.to.value;
        if (!value) { show('Choose a date and time.'); return; }
        moveClock({ to: (value.length === 16 ? value + ':00' : value) + 'Z' });
      } },
      el('label', {}, 'Move to (UTC)', el('input', { name: 'to', type: 'datetime-local', step: 1 })),
      el('button', { type: 'submit' }, 'Move to'))),
    el('p', { id: 'clock-result', role: 'status' }));
}

// --- resource groups and deployments (the ARM front door, docs/reference/front-door.md) ------------------

const ARM_RESOURCES = '2021-04-01';

function groupPath(s, rg) { return '/subscriptions/' + encodeURIComponent(s) + '/resourceGroups/' + encodeURIComponent(rg); }

function deploymentPath(s, rg, name) {
  return groupPath(s, rg) + '/providers/Microsoft.Resources/deployments/' + encodeURIComponent(name);
}

function armGet(path) {
  return api('GET', path + '?' + new URLSearchParams({ 'api-version': ARM_RESOURCES }).toString());
}

async function optional(promise) {
  // A read the page can do without: its error becomes a line on the page instead of the whole page failing.
  try { return { value: await promise }; } catch (error) { if (error.status === 401) throw error; return { error }; }
}

function schedulerLink(id, fallback) {
  // A Scheduler resource id → the dashboard's page for it; anything else stays text.
  const match = /^\/subscriptions\/([^/]+)\/resourceGroups\/([^/]+)\/providers\/Microsoft\.Scheduler\/jobCollections\/([^/]+)(?:\/jobs\/([^/]+))?$/i
    .exec(id || '');
  if (!match) return fallback;
  const [s, rg, jc, job] = match.slice(1).map((part) => (part === undefined ? undefined : decodeURIComponent(part)));
  return job ? link(hashOf('j', s, rg, jc, job), fallback) : link(hashOf('c', s, rg, jc), fallback);
}

function errorBlock(error) {
  // An ARM error with its nested details, as a list (every value as text).
  if (!error) return null;
  return el('ul', { className: 'error-tree' }, el('li', {},
    el('strong', {}, error.code || 'Error'), error.message ? ': ' + error.message : '',
    (error.details || []).length ? (error.details || []).map((detail) => errorBlock(detail)) : null));
}

function statusText(value) {
  // An operation's statusMessage: text, an ARM error ({error: {code, message}}), or any other JSON.
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value;
  const error = value.error || (value.code && value.message ? value : null);
  return error ? `${error.code}: ${error.message}` : JSON.stringify(value);
}

async function groupView(main, [s, rg]) {
  const [group, listed, deployments] = await Promise.all([
    optional(armGet(groupPath(s, rg))),
    api('GET', '/_emulator/dashboard/collections'),
    optional(armGet(groupPath(s, rg) + '/providers/Microsoft.Resources/deployments')),
  ]);
  const collections = listed.value.filter((c) => is(c.subscriptionId, s) && is(c.resourceGroup, rg));
  const rows = deployments.value ? deployments.value.value.map((d) => el('tr', {},
    el('td', {}, link(hashOf('d', s, rg, d.name), d.name)),
    el('td', { className: stateClass('status', d.properties.provisioningState) }, d.properties.provisioningState),
    el('td', { className: 'hide-narrow' }, d.properties.mode || '—'),
    el('td', {}, time(d.properties.timestamp)),
    el('td', { className: 'hide-narrow' }, d.properties.duration || '—'),
    el('td', {}, d.properties.error ? d.properties.error.code : ''))) : [];
  const content = el('div', { id: 'group-page', 'data-key': s + '/' + rg },
    el('p', {}, link('#/collections', 'Collections'), ' / ', s),
    el('h1', {}, rg),
    el('p', { id: 'group-summary', className: 'muted' }, group.value
      ? `Resource group · ${group.value.location} · ${group.value.properties?.provisioningState || ''}` +
        (group.value.tags && Object.keys(group.value.tags).length ? ' · tags ' + Object.entries(group.value.tags).map(([k, v]) => `${k}=${v}`).join(', ') : '')
      : 'Resource group (not created explicitly: it holds collections made by a PUT)'),
    el('h2', {}, 'Job collections'),
    collectionsTable(collections, 'The collections in this group'),
    el('h2', {}, 'Deployments'),
    deployments.error ? el('p', { className: 'muted' }, 'Deployments are not available: ' + deployments.error.message)
      : rows.length ? el('div', { className: 'table-wrap', id: 'deployments' }, dataTable(
        el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, 'Deployment'), el('th', { scope: 'col' }, 'State'),
          el('th', { scope: 'col', className: 'hide-narrow' }, 'Mode'), el('th', { scope: 'col' }, 'Time'),
          el('th', { scope: 'col', className: 'hide-narrow' }, 'Duration'), el('th', { scope: 'col' }, 'Error'))),
        el('tbody', {}, rows))) : el('p', { className: 'muted' }, 'No deployments in this group.'));
  const old = main.querySelector('#group-page');
  if (old && old.dataset.key === content.dataset.key) {
    if (old.dataset.text !== JSON.stringify([group.value, collections, deployments.value])) swap(old, content);
  } else {
    main.replaceChildren(content);
  }
  content.dataset.text = JSON.stringify([group.value, collections, deployments.value]);
}

async function deploymentView(main, [s, rg, name]) {
  const [deployment, operations] = await Promise.all([
    armGet(deploymentPath(s, rg, name)),
    optional(armGet(groupPath(s, rg).replace('/resourceGroups/', '/resourcegroups/') + '/deployments/' + encodeURIComponent(name) + '/operations')),
  ]);
  const p = deployment.properties || {};
  const ops = operations.value ? operations.value.value.map((o) => {
    const q = o.properties || {};
    const target = q.targetResource || {};
    return el('tr', {},
      el('td', {}, schedulerLink(target.id, target.resourceName || target.id || '—'), el('div', { className: 'muted hide-narrow' }, target.resourceType || '')),
      el('td', { className: 'hide-narrow' }, q.provisioningOperation || '—'),
      el('td', { className: stateClass('status', q.provisioningState) }, q.provisioningState || '—'),
      el('td', { className: 'hide-narrow' }, q.statusCode || '—'),
      el('td', { className: 'message-cell' }, statusText(q.statusMessage)),
      el('td', { className: 'hide-narrow' }, time(q.timestamp)));
  }) : [];
  const content = el('div', { id: 'deployment-page', 'data-key': [s, rg, name].join('/') },
    el('p', {}, link('#/collections', 'Collections'), ' / ', link(hashOf('g', s, rg), rg), ' / deployments'),
    el('h1', {}, name),
    el('p', { id: 'deployment-state' }, 'State: ', el('strong', { className: stateClass('status', p.provisioningState) }, p.provisioningState || '—'),
      ` · ${p.mode || ''} mode · `, time(p.timestamp), p.duration ? ` · ${p.duration}` : ''),
    p.error ? el('section', { id: 'deployment-error', className: 'card' }, el('h2', {}, 'Error'), errorBlock(p.error)) : null,
    el('h2', {}, 'Operations'),
    operations.error ? el('p', { className: 'muted' }, 'Operations are not available: ' + operations.error.message)
      : ops.length ? el('div', { className: 'table-wrap', id: 'operations' }, dataTable(
        el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, 'Resource'), el('th', { scope: 'col', className: 'hide-narrow' }, 'Operation'),
          el('th', { scope: 'col' }, 'State'), el('th', { scope: 'col', className: 'hide-narrow' }, 'Status'), el('th', { scope: 'col' }, 'Message'),
          el('th', { scope: 'col', className: 'hide-narrow' }, 'Time'))),
        el('tbody', {}, ops))) : el('p', { className: 'muted' }, 'No operations.'),
    p.outputs && Object.keys(p.outputs).length ? [el('h2', {}, 'Outputs'), el('pre', { id: 'outputs' }, JSON.stringify(p.outputs, null, 2))] : null);
  const text = JSON.stringify([deployment, operations.value]);
  const old = main.querySelector('#deployment-page');
  if (old && old.dataset.key === content.dataset.key) {
    if (old.dataset.text !== text) swap(old, content);
  } else {
    main.replaceChildren(content);
  }
  content.dataset.text = text;
}

// --- routing and refresh --------------------------------------------------------------------------

const ROUTES = [
  [/^#\/c\/([^/]+)\/([^/]+)\/([^/]+)$/, collectionView],
  [/^#\/j\/([^/]+)\/([^/]+)\/([^/]+)\/([^/]+)$/, jobView],
  [/^#\/g\/([^/]+)\/([^/]+)$/, groupView],
  [/^#\/d\/([^/]+)\/([^/]+)\/([^/]+)$/, deploymentView],
  [/^#\/calculator$/, calculatorView],
  [/^#\/collections$/, collectionsView],
  [/^#\/jobs(?:\?.*)?$/, searchView],
  [/^(#\/?)?$/, overviewView],
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
    if (is(clock.mode, 'virtual')) {
      if (!node.querySelector('#clock-panel')) node.replaceChildren(clockPanel());
      node.querySelector('#clock-now').replaceChildren(time(clock.now));
    } else {
      node.replaceChildren('Time ', time(clock.now));
    }
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
  main.replaceChildren(el('p', {}, 'Nothing here. ', link('#/', 'Back to the overview')));
}

window.addEventListener('hashchange', route);
window.addEventListener('DOMContentLoaded', () => {
  route();
  timer = setInterval(() => { if (!document.hidden && view.render && view.render !== calculatorView) refresh(); }, POLL_MS);
});
