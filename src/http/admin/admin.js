// The staff console: a client of /graphql signed in with a staff session (an httpOnly cookie the
// script never sees, and the session's CSRF token, sent as x-csrf-token on every call). What a
// person may do is the server's to decide: a refused operation shows the server's message.
// Every value from the API is written with textContent, never as HTML: a customer's e-mail, an
// order id or a rule's name is shown as text whatever it holds. Plain browser JavaScript, no build step.
'use strict';

const $ = (selector) => document.querySelector(selector);
const LEDGER_PAGE = 20;
const numbers = new Intl.NumberFormat('en-US');
const dates = new Intl.DateTimeFormat('en-US', { dateStyle: 'medium', timeStyle: 'short' });
const SECTIONS = ['sign-in', 'accept', 'reset', 'customers', 'customer'];

const state = { session: null, customer: null, ledgerAfter: null };
/** The screens of the other scripts (settings.js, webhooks.js, audit.js): #/<name>/<arg> shows SCREENS[name](arg). */
const SCREENS = {};

// --- Talking to the server -------------------------------------------------------------------

/** A JSON call to the console's session routes; resolves to { status, body }. */
async function call(method, path, body) {
  const headers = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (state.session) headers['x-csrf-token'] = state.session.csrfToken;
  const res = await fetch(path, { method, headers, credentials: 'same-origin', body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = { message: text };
  }
  return { status: res.status, body: parsed };
}

/** A GraphQL operation as the signed-in person; throws the server's message when it refuses. */
async function gql(query, variables = {}) {
  const { status, body } = await call('POST', '/graphql', { query, variables });
  if (status === 401) {
    await showSignIn('Your session has ended: sign in again.');
    throw new Error('signed out');
  }
  if (body && body.errors && body.errors.length) throw new Error(body.errors.map((e) => e.message).join('; '));
  if (status >= 400 || !body) throw new Error(`the server answered ${status}`);
  return body.data;
}

/** An event handler whose failure (a refusal, the network) is shown, not thrown into the console. */
const guarded = (handler) => async (event) => {
  try {
    await handler(event);
  } catch (err) {
    if (err.message !== 'signed out') say(err.message);
  }
};

function errorMessage(body, status) {
  return (body && (body.message || body.error)) || `the server answered ${status}`;
}

// --- Showing things --------------------------------------------------------------------------

function show(id) {
  for (const s of SECTIONS) $(`#${s}`).hidden = s !== id;
  $('#main').focus();
}

function say(text, ok = false) {
  const el = $('#message');
  el.textContent = text;
  el.className = ok ? 'message ok' : 'message';
  el.hidden = !text;
}

/** A table row of text cells (strings or numbers; a Node is appended as is). */
function row(cells) {
  const tr = document.createElement('tr');
  for (const cell of cells) {
    const td = document.createElement('td');
    if (cell && typeof cell === 'object' && 'nodeType' in cell) td.append(cell);
    else if (typeof cell === 'number') {
      td.className = 'num';
      td.textContent = numbers.format(cell);
    } else td.textContent = cell ?? '';
    tr.append(td);
  }
  return tr;
}

const when = (iso) => (iso ? dates.format(new Date(iso)) : '');

/**
 * userErrors shown beside the form's fields (the field named by the error's path after `input`,
 * dotted as in `expiry.days`, else by its last element), the rest above.
 */
function showUserErrors(form, errors) {
  for (const old of form.querySelectorAll('.field-error')) old.remove();
  const general = [];
  for (const error of errors) {
    const path = error.field || [];
    const input = path.length ? form.elements.namedItem(path.slice(path[0] === 'input' ? 1 : 0).join('.')) || form.elements.namedItem(path[path.length - 1]) : null;
    // A hidden field (an edited item's id) shows nothing: its error goes above with the rest.
    if (input && input.type !== 'hidden' && input.insertAdjacentElement) {
      const p = document.createElement('p');
      p.className = 'field-error';
      p.id = `${input.id}-error`;
      p.textContent = error.message;
      input.setAttribute('aria-describedby', p.id);
      input.insertAdjacentElement('afterend', p);
    } else general.push(error.message);
  }
  say(general.join('; '));
  const first = form.querySelector('[aria-describedby$="-error"]');
  if (first) first.focus();
}

// --- Session ---------------------------------------------------------------------------------

async function loadSession() {
  const { status, body } = await call('GET', '/admin/session');
  state.session = status === 200 ? body : null;
  $('#nav').hidden = !state.session;
  $('#whoami').textContent = state.session ? `${state.session.staff.email} · ${state.session.staff.role} · ${state.session.shop.name}` : '';
  return state.session;
}

async function showSignIn(text = '') {
  state.session = null;
  $('#nav').hidden = true;
  $('#whoami').textContent = '';
  say(text);
  show('sign-in');
  $('#sign-in-email').focus();
}

$('#sign-in-form').addEventListener('submit', guarded(async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  const { status, body } = await call('POST', '/admin/session', { email: form.email.value, password: form.password.value });
  form.password.value = '';
  if (status !== 200) return say(status === 429 ? 'Too many tries: wait a while and try again.' : errorMessage(body, status));
  say('');
  await loadSession();
  location.hash = '#/customers';
  route();
}));

$('#sign-out').addEventListener('click', guarded(async () => {
  await call('DELETE', '/admin/session');
  await showSignIn('Signed out.');
}));

/** The token of a one-time link (/admin/accept#token=…), kept out of the server's logs by the fragment. */
const linkToken = () => new URLSearchParams(location.hash.slice(1)).get('token');

$('#accept-form').addEventListener('submit', guarded(async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  const { status, body } = await call('POST', '/admin/invites/accept', { token: linkToken(), name: form.name.value, password: form.password.value });
  form.password.value = '';
  if (status !== 200) return say(errorMessage(body, status));
  history.replaceState(null, '', '/admin#/customers');
  await loadSession();
  route();
}));

$('#reset-form').addEventListener('submit', guarded(async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  const { status, body } = await call('POST', '/admin/password-reset', { token: linkToken(), password: form.password.value });
  form.password.value = '';
  if (status !== 200) return say(errorMessage(body, status));
  history.replaceState(null, '', '/admin');
  await showSignIn('');
  say('Your password is set: sign in with it.', true);
}));

// --- Customers -------------------------------------------------------------------------------

const SEARCH = `query Search($query: String!) { customerSearch(query: $query, first: 25) { matchedBy customer { _id email shopifyCustomerId points tier { tier { name } } } } }`;

$('#search-form').addEventListener('submit', (event) => {
  event.preventDefault();
  location.hash = `#/customers/${encodeURIComponent(event.currentTarget.query.value.trim())}`;
});

async function showSearch(query) {
  show('customers');
  $('#search-query').value = query;
  const table = $('#search-results');
  if (!query) {
    table.hidden = true;
    return $('#search-query').focus();
  }
  const found = (await gql(SEARCH, { query })).customerSearch;
  const body = table.querySelector('tbody');
  body.replaceChildren(
    ...found.map(({ customer: c }) => {
      const link = document.createElement('a');
      link.href = `#/customer/${encodeURIComponent(c.shopifyCustomerId)}`;
      link.textContent = c.email;
      return row([link, c.shopifyCustomerId, c.points, c.tier ? c.tier.tier.name : '']);
    }),
  );
  $('#search-caption').textContent = found.length ? `${found.length} found` : 'No customer found';
  table.hidden = false;
}

const CUSTOMER = `query Customer($id: String!, $first: Int!, $after: String) {
  customer(identifier: $id) {
    _id email shopifyCustomerId points pendingPoints referralCode
    tier { tier { name } since }
    tierOverride { tier { name } until reason }
    tierProgress { current remaining next { name } }
    activities(first: $first, after: $after) { edges { node { _id type oldPoints newPoints description note createdAt } } pageInfo { hasNextPage endCursor } }
    discountCodes(first: 50) { edges { node { _id code status pointsAmount createdAt orderId } } }
    orders(first: 50) { edges { node { orderId status total currency pointsEarned discountCodes { code } } } }
    referees(first: 50) { edges { node { email status } } }
  }
  tiers { id name }
}`;

async function showCustomer(identifier) {
  const data = await gql(CUSTOMER, { id: identifier, first: LEDGER_PAGE, after: null });
  const c = data.customer;
  show('customer');
  if (!c) {
    $('#customer-title').textContent = 'No such customer';
    $('#customer-figures').hidden = true;
    return;
  }
  state.customer = c;
  $('#customer-figures').hidden = false;
  $('#customer-title').textContent = `${c.email} (${c.shopifyCustomerId})`;
  $('#c-points').textContent = numbers.format(c.points);
  $('#c-pending').textContent = numbers.format(c.pendingPoints);
  $('#c-tier').textContent = c.tier ? c.tier.tier.name : 'none';
  $('#c-progress').textContent = c.tierProgress.next ? `${c.tierProgress.remaining} to ${c.tierProgress.next.name}` : '';
  $('#c-referral').textContent = c.referralCode || '–';
  showOverride(c.tierOverride, data.tiers);
  $('#ledger tbody').replaceChildren();
  addLedger(c.activities);
  $('#codes tbody').replaceChildren(...c.discountCodes.edges.map(({ node }) => row([node.code, node.status, node.pointsAmount, when(node.createdAt), node.orderId, cancelButton(node)])));
  $('#orders tbody').replaceChildren(
    ...c.orders.edges.map(({ node }) => row([node.orderId, node.status, `${node.total} ${node.currency}`, node.pointsEarned, node.discountCodes.map((d) => d.code).join(', ')])),
  );
  $('#referees').replaceChildren(
    ...c.referees.edges.map(({ node }) => {
      const li = document.createElement('li');
      li.textContent = `${node.email} (${node.status})`;
      return li;
    }),
  );
}

function addLedger(page) {
  $('#ledger tbody').append(...page.edges.map(({ node: a }) => row([when(a.createdAt), a.type, a.newPoints - a.oldPoints, a.newPoints, a.description, a.note])));
  state.ledgerAfter = page.pageInfo.hasNextPage ? page.pageInfo.endCursor : null;
  $('#ledger-more').hidden = !state.ledgerAfter;
}

$('#ledger-more').addEventListener('click', guarded(async () => {
  const data = await gql(CUSTOMER, { id: state.customer.shopifyCustomerId, first: LEDGER_PAGE, after: state.ledgerAfter });
  addLedger(data.customer.activities);
}));

function cancelButton(code) {
  if (code.status !== 'issued') return '';
  const button = document.createElement('button');
  button.type = 'button';
  button.textContent = 'Cancel';
  button.setAttribute('aria-label', `Cancel the code ${code.code} and give its points back`);
  button.addEventListener('click', guarded(async () => {
    const result = (await gql(`mutation Cancel($code: String!) { discountCodeCancel(input: { code: $code, returnPoints: true }) { userErrors { code field message } } }`, { code: code.code }))
      .discountCodeCancel;
    if (result.userErrors.length) return say(result.userErrors.map((e) => e.message).join('; '));
    say(`The code ${code.code} is cancelled and its points are back.`, true);
    await showCustomer(state.customer.shopifyCustomerId);
  }));
  return button;
}

function showOverride(override, tiers) {
  const select = $('#override-tier');
  const none = document.createElement('option');
  none.value = '';
  none.textContent = 'No tier';
  select.replaceChildren(
    ...tiers.map((t) => {
      const option = document.createElement('option');
      option.value = t.id;
      option.textContent = t.name;
      return option;
    }),
    none,
  );
  $('#override-now').textContent = override ? `Held at ${override.tier ? override.tier.name : 'no tier'} until ${when(override.until)}${override.reason ? ` (${override.reason})` : ''}.` : '';
  $('#override-clear').hidden = !override;
  $('#override-form').hidden = tiers.length === 0;
}

/** Runs a customer mutation and shows its userErrors in `form`, or `done` and the customer again. */
async function customerMutation(form, field, query, input, done) {
  const result = (await gql(query, { input }))[field];
  if (result.userErrors.length) return showUserErrors(form, result.userErrors);
  form.reset();
  say(done, true);
  await showCustomer(state.customer.shopifyCustomerId);
}

$('#override-form').addEventListener('submit', guarded(async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  // The end of the chosen day where the person is.
  const until = new Date(`${form.until.value}T23:59:59`).toISOString();
  await customerMutation(form, 'customerTierOverride', `mutation Override($input: CustomerTierOverrideInput!) { customerTierOverride(input: $input) { userErrors { code field message } } }`,
    { customerIdentifier: state.customer.shopifyCustomerId, tierId: form.tierId.value || null, until, reason: form.reason.value || null }, 'The tier is overridden.');
}));

$('#override-clear').addEventListener('click', guarded(async () => {
  await customerMutation($('#override-form'), 'customerTierOverrideClear', `mutation Clear($input: CustomerTierOverrideClearInput!) { customerTierOverrideClear(input: $input) { userErrors { code field message } } }`,
    { customerIdentifier: state.customer.shopifyCustomerId }, 'The override has ended.');
}));

$('#adjust-form').addEventListener('submit', guarded(async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  const amount = Number(form.amount.value);
  const field = amount < 0 ? 'pointsSubtract' : 'pointsAdd';
  // The internal reason is the entry's note; what the customer may see is its description.
  const input = { customerIdentifier: state.customer.shopifyCustomerId, amount: Math.abs(amount), note: form.note.value, description: form.description.value || null };
  await customerMutation(form, field, `mutation Adjust($input: PointsChangeInput!) { ${field}(input: $input) { userErrors { code field message } } }`, input, `${numbers.format(amount)} points: done.`);
}));

// --- Routing ---------------------------------------------------------------------------------

async function route() {
  try {
    if (location.pathname === '/admin/accept') return show('accept');
    if (location.pathname === '/admin/reset') return show('reset');
    if (!state.session && !(await loadSession())) return showSignIn();
    const [, page, arg] = location.hash.split('/');
    const value = arg === undefined ? '' : decodeURIComponent(arg);
    if (page === 'customer' && value) return await showCustomer(value);
    if (SCREENS[page]) return await SCREENS[page](value);
    return await showSearch(value);
  } catch (err) {
    if (err.message !== 'signed out') say(err.message);
  }
}

window.addEventListener('hashchange', () => {
  say('');
  route();
});
// After every deferred script: the other screens' scripts have registered theirs.
document.addEventListener('DOMContentLoaded', route);
