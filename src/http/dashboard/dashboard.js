// The live dashboard: one graphql-ws connection authenticated with the pasted API key, one
// `events` subscription on the checked topics. Plain browser JavaScript, no build step;
// graphql-ws's browser build (served beside this file) provides window.graphqlWs.
'use strict';

const MAX_EVENTS = 100;
const $ = (selector) => document.querySelector(selector);
const EVENTS_QUERY = 'subscription Live($topics: [String!]!) { events(topics: $topics) { id type timestamp shopId data } }';
const CUSTOMERS_QUERY =
  'query Names($after: String) { customers(first: 250, after: $after) { edges { node { _id email shopifyCustomerId } } pageInfo { hasNextPage endCursor } } }';
// Names are looked up by reading the customer list: at most this many pages (250 each) a pass, and
// a new pass for a customer not seen yet at most every NAME_RETRY_MS.
const NAME_PAGES = 40;
const NAME_RETRY_MS = 10_000;

const state = {
  client: null,
  unsubscribe: null,
  counts: new Map(),
  total: 0,
  net: 0,
  balances: new Map(), // customer _id -> { balance, delta }
  // Events name customers by their internal _id; people know them by e-mail and the shop's id.
  names: new Map(), // customer _id -> 'email (shopifyCustomerId)'
  namesPass: null, // the running pass over the customer list
  namesPassAt: 0,
};

function setStatus(text, kind) {
  const el = $('#status');
  el.textContent = text;
  el.className = `status ${kind}`;
}

function wsUrl() {
  return `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/graphql`;
}

function connect(apiKey) {
  disconnect();
  setStatus('connecting…', 'idle');
  const client = window.graphqlWs.createClient({
    url: wsUrl(),
    connectionParams: { Authorization: `Bearer ${apiKey}` },
    lazy: false,
    // Reconnect after network trouble or a server restart, never after a refused key.
    retryAttempts: Infinity,
    shouldRetry: (event) => !(event && event.code === 4403),
    on: {
      connected: () => setStatus('live', 'live'),
      closed: (event) => {
        if (state.client !== client) return;
        if (event && event.code === 4403) {
          setStatus('API key refused', 'error');
          disconnect(false);
        } else {
          setStatus('reconnecting…', 'idle');
        }
      },
    },
    onNonLazyError: () => {},
  });
  state.client = client;
  state.names.clear();
  state.namesPassAt = 0;
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

function loadTopics(client) {
  client.subscribe(
    { query: '{ webhookTopics { topic description } }' },
    {
      next: ({ data }) => {
        if (data) renderTopics(data.webhookTopics);
      },
      error: () => {},
      complete: () => {},
    },
  );
}

function renderTopics(topics) {
  const list = $('#topic-list');
  list.replaceChildren();
  const groups = [...new Set(topics.map((t) => t.topic.split('/')[0]))];
  const box = (parent, value, text, title, checked, group) => {
    const label = document.createElement('label');
    if (group) label.className = 'group';
    label.title = title;
    const input = document.createElement('input');
    input.type = 'checkbox';
    input.value = value;
    input.checked = checked;
    input.dataset.group = group ? value.split('/')[0] : '';
    label.append(input, ` ${text}`);
    parent.append(label);
  };
  for (const group of groups) {
    const div = document.createElement('div');
    div.className = 'topic-group';
    box(div, `${group}/*`, `${group}/*`, `every ${group} event`, true, true);
    for (const t of topics.filter((t) => t.topic.startsWith(`${group}/`))) box(div, t.topic, t.topic.split('/')[1], t.description, false, false);
    list.append(div);
  }
  $('#topics').disabled = false;
  subscribe();
}

function query(client, payload) {
  return new Promise((resolve, reject) => {
    let result;
    client.subscribe(payload, { next: (r) => (result = r), error: reject, complete: () => resolve(result) });
  });
}

function learnName(customer) {
  if (customer && customer._id && customer.email) state.names.set(customer._id, `${customer.email} (${customer.shopifyCustomerId})`);
}

/** Reads the customer list until every balance shown has a name (or the page budget is spent). */
function lookUpNames() {
  const client = state.client;
  const missing = () => [...state.balances.keys()].some((id) => !state.names.has(id));
  if (!client || state.namesPass || !missing() || Date.now() - state.namesPassAt < NAME_RETRY_MS) return;
  state.namesPassAt = Date.now();
  state.namesPass = (async () => {
    let after = null;
    for (let page = 0; page < NAME_PAGES && missing(); page++) {
      const { data } = await query(client, { query: CUSTOMERS_QUERY, variables: { after } });
      if (!data || state.client !== client) return;
      for (const { node } of data.customers.edges) learnName(node);
      renderBalances();
      if (!data.customers.pageInfo.hasNextPage) return;
      after = data.customers.pageInfo.endCursor;
    }
  })()
    .catch(() => {})
    .finally(() => {
      state.namesPass = null;
    });
}

function selectedTopics() {
  const checked = [...document.querySelectorAll('#topic-list input:checked')].map((i) => i.value);
  // A checked group covers its topics.
  const groups = new Set(checked.filter((t) => t.endsWith('/*')).map((t) => t.split('/')[0]));
  return checked.filter((t) => t.endsWith('/*') || !groups.has(t.split('/')[0]));
}

function subscribe() {
  state.unsubscribe?.();
  state.unsubscribe = null;
  const topics = selectedTopics();
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

function onEvent(event) {
  state.counts.set(event.type, (state.counts.get(event.type) ?? 0) + 1);
  state.total++;
  const data = event.data ?? {};
  if (event.type.startsWith('customers/')) learnName(data);
  if (event.type.startsWith('points/')) {
    trackBalance(data.customer, data.newPoints, data.newPoints - data.oldPoints);
  } else if (event.type === 'redemptions/created') {
    const known = state.balances.get(data.customer);
    trackBalance(data.customer, known ? known.balance - data.pointsAmount : null, -data.pointsAmount);
  }
  renderCounts();
  renderBalances(data.customer);
  prependEvent(event);
  lookUpNames();
}

function trackBalance(customer, balance, delta) {
  state.net += delta;
  state.balances.set(customer, { balance, delta });
}

function renderCounts() {
  const body = $('#counts tbody');
  body.replaceChildren(
    ...[...state.counts].sort(([a], [b]) => a.localeCompare(b)).map(([topic, count]) => row([topic, count], [null, 'num'], topic)),
  );
  $('#count-total').textContent = String(state.total);
}

function renderBalances(changed) {
  const net = $('#points-net');
  net.textContent = `${state.net > 0 ? '+' : ''}${state.net}`;
  net.className = state.net > 0 ? 'up' : state.net < 0 ? 'down' : '';
  const sum = [...state.balances.values()].reduce((s, b) => s + (b.balance ?? 0), 0);
  $('#points-sum').textContent = String(sum);
  const body = $('#balances tbody');
  body.replaceChildren(
    ...[...state.balances].map(([customer, { balance, delta }]) => {
      const name = state.names.get(customer) ?? '…';
      const tr = row([name, balance ?? '?', `${delta > 0 ? '+' : ''}${delta}`], [null, 'num', `num ${delta >= 0 ? 'up' : 'down'}`], customer);
      if (customer === changed) tr.className = 'flash';
      return tr;
    }),
  );
}

function row(cells, classes, key) {
  const tr = document.createElement('tr');
  tr.dataset.key = key;
  cells.forEach((value, i) => {
    const td = document.createElement('td');
    if (classes[i]) td.className = classes[i];
    td.textContent = String(value);
    tr.append(td);
  });
  return tr;
}

function prependEvent(event) {
  const li = document.createElement('li');
  li.dataset.type = event.type;
  const meta = document.createElement('div');
  meta.className = 'meta';
  for (const [cls, text] of [['type', event.type], ['time', event.timestamp], ['id', event.id]]) {
    const span = document.createElement('span');
    span.className = cls;
    span.textContent = text;
    meta.append(span);
  }
  const pre = document.createElement('pre');
  pre.textContent = JSON.stringify(event.data, null, 2);
  li.append(meta, pre);
  const list = $('#events');
  list.prepend(li);
  while (list.children.length > MAX_EVENTS) list.lastElementChild.remove();
}

$('#connect').addEventListener('submit', (e) => {
  e.preventDefault();
  connect($('#api-key').value.trim());
});
$('#disconnect-button').addEventListener('click', () => disconnect());
$('#topic-list').addEventListener('change', subscribe);
