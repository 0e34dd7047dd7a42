// The program page: one graphql-ws connection authenticated with the pasted API key (kept in this
// script's memory only), one query for the figures (insights, recent ledger entries) and one
// `events` subscription on every topic: each event refreshes the figures, and those on the checked
// topics are listed. Plain browser JavaScript, no build step; graphql-ws's and Chart.js's browser
// builds (served beside this file, from node_modules) provide window.graphqlWs and window.Chart.
// Opened from the staff console (/dashboard#session), the same connection is opened with the
// person's session cookie instead of a key (the server closes it when the session ends).
'use strict';

const MAX_EVENTS = 100;
const RECENT = 15;
const DAY = 86_400_000;
// Events come in bursts (an order earns, a tier changes, a webhook is queued): one refresh after the burst.
const REFRESH_AFTER_MS = 250;
const $ = (selector) => document.querySelector(selector);
const EVENTS_QUERY = 'subscription Live($topics: [String!]!) { events(topics: $topics) { id type timestamp shopId data } }';
const PROGRAM_QUERY = `query Program($from: DateTime!, $to: DateTime!, $recent: Int!) {
  shop { insights(from: $from, to: $to, interval: day) {
    timezone
    points { at date issued { orders rules manual referrals total } removedManually redeemed expired clawedBack outstanding pending activeMembers newMembers members }
    rewards { rewardId name type codes used expired cancelled useRate points discount }
    tiers { tierId name members }
  } }
  activities(first: $recent) { edges { node { _id type settingType oldPoints newPoints createdAt holder { email shopifyCustomerId } } } }
}`;
const ACTIVITY_LABELS = {
  add_points: 'Points added',
  subtract_points: 'Points subtracted',
  update_points: 'Balance set',
  earn_points: 'Earned',
  redeem_points: 'Redeemed',
  referral_reward: 'Referral reward',
  expire_points: 'Expired',
  clawback_points: 'Taken back (refund)',
};
// Okabe-Ito: told apart with any colour vision.
const COLORS = { blue: '#0072B2', sky: '#56B4E9', green: '#009E73', pink: '#CC79A7', orange: '#E69F00', vermilion: '#D55E00', yellow: '#F0E442', black: '#000000' };
const numbers = new Intl.NumberFormat('en-US');
const fmt = (n) => numbers.format(n);
const signed = (n) => `${n > 0 ? '+' : ''}${fmt(n)}`;

const state = {
  client: null,
  unsubscribe: null,
  groups: [],
  counts: new Map(),
  total: 0,
  charts: null,
  refreshTimer: null,
  refreshing: Promise.resolve(),
  shownActivities: null, // ids in the recent-activity table, to mark the new ones
};

function setStatus(text, kind) {
  const el = $('#status');
  el.textContent = text;
  el.className = `status ${kind}`;
}

function wsUrl() {
  return `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/graphql`;
}

/**
 * The page's one connection: with `connectionParams` carrying an API key, or none (the browser sends
 * the console's session cookie with the upgrade). `says`: the status when live and when refused.
 */
function connect(connectionParams, says) {
  disconnect();
  setStatus('connecting…', 'idle');
  const client = window.graphqlWs.createClient({
    url: wsUrl(),
    connectionParams,
    lazy: false,
    // Reconnect after network trouble or a server restart, never after a refused key or an ended session.
    retryAttempts: Infinity,
    shouldRetry: (event) => !(event && event.code === 4403),
    on: {
      connected: () => {
        setStatus(says.live, 'live');
        // Whatever changed while the connection was down.
        scheduleRefresh();
      },
      closed: (event) => {
        if (state.client !== client) return;
        if (event && event.code === 4403) {
          setStatus(says.refused, 'error');
          disconnect(false);
        } else {
          setStatus('reconnecting…', 'idle');
        }
      },
    },
    onNonLazyError: () => {},
  });
  state.client = client;
  state.shownActivities = null;
  $('#connect-button').disabled = true;
  $('#disconnect-button').disabled = false;
  loadTopics(client);
}

function disconnect(resetStatus = true) {
  state.unsubscribe?.();
  state.unsubscribe = null;
  const client = state.client;
  state.client = null; // first, so the close this causes is not taken for a dropped connection
  // dispose() rejects when the connection it waits for was refused; that is already reported.
  Promise.resolve(client?.dispose()).catch(() => {});
  $('#topics').disabled = true;
  $('#connect-button').disabled = false;
  $('#disconnect-button').disabled = true;
  if (resetStatus) setStatus('not connected', 'idle');
}

function query(client, payload) {
  return new Promise((resolve, reject) => {
    let result;
    client.subscribe(payload, { next: (r) => (result = r), error: reject, complete: () => resolve(result) });
  });
}

async function loadTopics(client) {
  const result = await query(client, { query: '{ webhookTopics { topic description } }' }).catch(() => null);
  if (result?.data && state.client === client) renderTopics(result.data.webhookTopics);
}

function renderTopics(topics) {
  const list = $('#topic-list');
  list.replaceChildren();
  state.groups = [...new Set(topics.map((t) => t.topic.split('/')[0]))];
  const box = (parent, value, text, title, checked, group) => {
    const label = document.createElement('label');
    if (group) label.className = 'group';
    label.title = title;
    const input = document.createElement('input');
    input.type = 'checkbox';
    input.value = value;
    input.checked = checked;
    label.append(input, ` ${text}`);
    parent.append(label);
  };
  for (const group of state.groups) {
    const div = document.createElement('div');
    div.className = 'topic-group';
    div.setAttribute('role', 'group');
    div.setAttribute('aria-label', `${group} topics`);
    box(div, `${group}/*`, `${group}/*`, `every ${group} event`, true, true);
    for (const t of topics.filter((t) => t.topic.startsWith(`${group}/`))) box(div, t.topic, t.topic.split('/')[1], t.description, false, false);
    list.append(div);
  }
  $('#topics').disabled = false;
  subscribe();
}

/** Every topic: each event refreshes the figures; the checked ones are also listed. */
function subscribe() {
  state.unsubscribe?.();
  const topics = state.groups.map((group) => `${group}/*`);
  if (!state.client || topics.length === 0) return;
  state.unsubscribe = state.client.subscribe(
    { query: EVENTS_QUERY, variables: { topics } },
    {
      next: (result) => {
        if (result.data) onEvent(result.data.events);
        else if (result.errors) setStatus(result.errors[0].message, 'error');
      },
      error: () => {},
      complete: () => {},
    },
  );
}

function isShown(type) {
  const checked = new Set([...document.querySelectorAll('#topic-list input:checked')].map((i) => i.value));
  return checked.has(type) || checked.has(`${type.split('/')[0]}/*`);
}

function onEvent(event) {
  state.counts.set(event.type, (state.counts.get(event.type) ?? 0) + 1);
  state.total++;
  renderCounts();
  if (isShown(event.type)) prependEvent(event);
  scheduleRefresh();
}

function scheduleRefresh() {
  clearTimeout(state.refreshTimer);
  state.refreshTimer = setTimeout(() => {
    state.refreshing = state.refreshing.then(refresh).catch(() => {});
  }, REFRESH_AFTER_MS);
}

async function refresh() {
  const client = state.client;
  if (!client) return;
  const days = Number($('#range').value);
  const now = Date.now();
  // Every local day of the shop from `days - 1` days ago to today (the first rounded down to its midnight).
  const variables = { from: new Date(now - (days - 1) * DAY).toISOString(), to: new Date(now + 1000).toISOString(), recent: RECENT };
  const result = await query(client, { query: PROGRAM_QUERY, variables });
  if (state.client !== client) return;
  if (!result?.data) {
    setStatus(result?.errors?.[0]?.message ?? 'the figures could not be read', 'error');
    return;
  }
  renderProgram(result.data.shop.insights, days);
  renderActivity(result.data.activities.edges.map((e) => e.node), result.data.shop.insights.timezone);
  document.body.dataset.refreshedAt = String(now);
}

function text(selector, value) {
  $(selector).textContent = value;
}

function renderProgram(insights, days) {
  const points = insights.points;
  const last = points.at(-1);
  const sum = (f) => points.reduce((s, p) => s + f(p), 0);
  const issued = sum((p) => p.issued.total);
  const redeemed = sum((p) => p.redeemed);
  text('#period', `(last ${days} days, days of ${insights.timezone})`);
  text('#kpi-members', fmt(last.members));
  text('#kpi-new-members', `${signed(sum((p) => p.newMembers))} in the period`);
  text('#kpi-active', fmt(last.activeMembers ?? 0));
  text('#kpi-outstanding', fmt(last.outstanding));
  text('#kpi-pending', fmt(last.pending));
  text('#kpi-issued', fmt(issued));
  text('#kpi-redeemed', fmt(redeemed));
  text('#kpi-rate', issued > 0 ? `${((redeemed * 100) / issued).toFixed(1)} %` : '–');
  text('#kpi-expired', fmt(sum((p) => p.expired)));

  // By each day's own date: a day before a change of time zone is a day of the zone the shop had then.
  const dayLabel = new Intl.DateTimeFormat('en-US', { timeZone: 'UTC', month: 'short', day: 'numeric' });
  const labels = points.map((p) => dayLabel.format(new Date(`${p.date}T00:00:00Z`)));
  const tierRows = insights.tiers.map((t) => [t.name, t.members]);
  tierRows.unshift(['No tier', last.members - insights.tiers.reduce((s, t) => s + t.members, 0)]);
  const charts = state.charts ?? (state.charts = createCharts());
  setChart(charts.flow, labels, [
    points.map((p) => p.issued.orders),
    points.map((p) => p.issued.rules),
    points.map((p) => p.issued.manual),
    points.map((p) => p.issued.referrals),
    points.map((p) => -p.redeemed),
    points.map((p) => -p.expired),
    points.map((p) => -p.clawedBack),
    points.map((p) => -p.removedManually),
  ]);
  setChart(charts.liability, labels, [points.map((p) => p.outstanding), points.map((p) => p.pending)]);
  setChart(charts.members, labels, [points.map((p) => p.activeMembers ?? 0), points.map((p) => p.newMembers)]);
  setChart(charts.tiers, tierRows.map(([name]) => name), [tierRows.map(([, n]) => n)]);

  table('#flow-table', ['Day', 'Orders', 'Rules', 'Manual', 'Referrals', 'Issued', 'Redeemed', 'Expired', 'Taken back', 'Removed'], points.map((p, i) => [
    labels[i], p.issued.orders, p.issued.rules, p.issued.manual, p.issued.referrals, p.issued.total, p.redeemed, p.expired, p.clawedBack, p.removedManually,
  ]));
  table('#liability-table', ['Day', 'Outstanding', 'Pending'], points.map((p, i) => [labels[i], p.outstanding, p.pending]));
  table('#members-table', ['Day', 'Active', 'New', 'Members'], points.map((p, i) => [labels[i], p.activeMembers ?? 0, p.newMembers, p.members]));
  table('#tiers-table', ['Tier', 'Members'], tierRows);
  table('#rewards-table', ['Reward', 'Type', 'Codes issued', 'Used', 'Expired', 'Cancelled', 'Use rate', 'Points spent', 'Discount given'], insights.rewards.slice(0, 10).map((r) => [
    r.name ?? '(deleted reward)', r.type ?? '–', r.codes, r.used, r.expired, r.cancelled, rateText(r.useRate), r.points, discountText(r),
  ]), 'No redemptions in the period.');
}

// Codes used ÷ issued in the period, as the API rounds it (4 decimals: a percent with 2); none issued, no rate.
const rateText = (rate) => (rate === null ? '–' : `${(rate * 100).toFixed(2)} %`);

// Money off adds up; percentages do not.
const discountText = (reward) => (reward.type === 'percentage' ? '–' : reward.discount);

/** A table with a header row and one row per item; numbers right-aligned and grouped. */
function table(selector, headers, rows, empty) {
  const el = $(selector);
  const head = document.createElement('thead');
  const tr = document.createElement('tr');
  headers.forEach((h, i) => tr.append(cell('th', h, i > 0 ? 'num' : null, 'col')));
  head.append(tr);
  const body = document.createElement('tbody');
  for (const row of rows) {
    const r = document.createElement('tr');
    row.forEach((value, i) => r.append(i === 0 ? cell('th', value, null, 'row') : cell('td', typeof value === 'number' ? fmt(value) : value, 'num')));
    body.append(r);
  }
  if (rows.length === 0 && empty) {
    const r = document.createElement('tr');
    const td = cell('td', empty, 'hint');
    td.colSpan = headers.length;
    r.append(td);
    body.append(r);
  }
  el.replaceChildren(head, body);
}

function cell(tag, value, className, scope) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (scope) el.scope = scope;
  el.textContent = String(value);
  return el;
}

function createCharts() {
  const Chart = window.Chart;
  Chart.defaults.animation = false;
  Chart.defaults.color = '#1f2937';
  Chart.defaults.font.family = 'system-ui, sans-serif';
  Chart.defaults.maintainAspectRatio = false;
  const dataset = (label, color, extra = {}) => ({ label, backgroundColor: color, borderColor: color, data: [], ...extra });
  const make = (id, type, datasets, options = {}) => new Chart($(id), { type, data: { labels: [], datasets }, options });
  // Counts of people and points: no ticks between whole numbers.
  const wholeNumbers = { beginAtZero: true, ticks: { precision: 0 } };
  const stacked = { scales: { x: { stacked: true }, y: { stacked: true, ticks: { precision: 0 } } } };
  return {
    flow: make('#flow-chart', 'bar', [
      dataset('Orders', COLORS.blue, { stack: 'in' }),
      dataset('Rules', COLORS.sky, { stack: 'in' }),
      dataset('Manual', COLORS.green, { stack: 'in' }),
      dataset('Referrals', COLORS.pink, { stack: 'in' }),
      dataset('Redeemed', COLORS.orange, { stack: 'out' }),
      dataset('Expired', COLORS.vermilion, { stack: 'out' }),
      dataset('Taken back', COLORS.black, { stack: 'out' }),
      dataset('Removed', COLORS.yellow, { stack: 'out' }),
    ], stacked),
    liability: make('#liability-chart', 'line', [dataset('Outstanding', COLORS.blue, { pointRadius: 2 }), dataset('Pending', COLORS.orange, { pointRadius: 2 })], {
      scales: { y: wholeNumbers },
    }),
    members: make('#members-chart', 'bar', [dataset('Active', COLORS.green), dataset('New', COLORS.pink)], { scales: { y: wholeNumbers } }),
    tiers: make('#tiers-chart', 'bar', [dataset('Members', COLORS.blue)], { indexAxis: 'y', scales: { x: wholeNumbers }, plugins: { legend: { display: false } } }),
  };
}

function setChart(chart, labels, series) {
  chart.data.labels = labels;
  series.forEach((data, i) => (chart.data.datasets[i].data = data));
  chart.update('none');
}

function renderActivity(activities, timezone) {
  const when = new Intl.DateTimeFormat('en-US', { timeZone: timezone, month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });
  const seen = state.shownActivities;
  const body = $('#activity tbody');
  body.replaceChildren(
    ...activities.map((a) => {
      const change = a.newPoints - a.oldPoints;
      const tr = document.createElement('tr');
      tr.dataset.key = a._id;
      tr.setAttribute('role', 'row');
      tr.append(
        twoLines(a.holder ? a.holder.email : '(deleted customer)', a.holder ? `(${a.holder.shopifyCustomerId})` : ''),
        twoLines(`${ACTIVITY_LABELS[a.type] ?? a.type} · ${a.settingType}`, when.format(new Date(a.createdAt))),
        cell('td', signed(change), `num ${change >= 0 ? 'up' : 'down'}`),
        cell('td', fmt(a.newPoints), 'num'),
      );
      for (const td of tr.children) td.setAttribute('role', 'cell');
      if (seen && !seen.has(a._id)) tr.className = 'flash';
      return tr;
    }),
  );
  if (activities.length === 0) {
    const tr = document.createElement('tr');
    const td = cell('td', 'No points activity yet.', 'hint');
    td.colSpan = 4;
    tr.append(td);
    body.append(tr);
  }
  state.shownActivities = new Set(activities.map((a) => a._id));
}

/** A cell of two lines: `first`, and `second` smaller under it (one space between, for its text). */
function twoLines(first, second) {
  const td = cell('td', `${first} `);
  const span = document.createElement('span');
  span.className = 'second';
  span.textContent = second;
  td.append(span);
  return td;
}

function renderCounts() {
  const body = $('#counts tbody');
  body.replaceChildren(
    ...[...state.counts].sort(([a], [b]) => a.localeCompare(b)).map(([topic, count]) => {
      const tr = document.createElement('tr');
      tr.dataset.key = topic;
      tr.append(cell('th', topic, null, 'row'), cell('td', count, 'num'));
      return tr;
    }),
  );
  text('#count-total', String(state.total));
}

function prependEvent(event) {
  const li = document.createElement('li');
  li.dataset.type = event.type;
  const meta = document.createElement('div');
  meta.className = 'meta';
  for (const [cls, value] of [['type', event.type], ['time', event.timestamp], ['id', event.id]]) {
    const span = document.createElement('span');
    span.className = cls;
    span.textContent = value;
    meta.append(span);
  }
  const pre = document.createElement('pre');
  pre.textContent = JSON.stringify(event.data, null, 2);
  li.append(meta, pre);
  const list = $('#events');
  list.prepend(li);
  while (list.children.length > MAX_EVENTS) list.lastElementChild.remove();
}

async function useSession() {
  const res = await fetch('/admin/session', { headers: { accept: 'application/json' }, credentials: 'same-origin' });
  if (!res.ok) return setStatus('not signed in: sign in at /admin, or connect with an API key', 'error');
  const session = await res.json();
  connect(undefined, { live: `live, signed in as ${session.staff.email}`, refused: 'the session has ended: sign in again at /admin' });
  // Disconnecting would leave only the key's way back.
  $('#disconnect-button').disabled = true;
}

if (location.hash === '#session') useSession();

$('#connect').addEventListener('submit', (e) => {
  e.preventDefault();
  connect({ Authorization: `Bearer ${$('#api-key').value.trim()}` }, { live: 'live', refused: 'API key refused' });
});
$('#disconnect-button').addEventListener('click', () => disconnect());
$('#range').addEventListener('change', scheduleRefresh);
