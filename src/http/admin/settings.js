// The console's settings screen (#/settings): earning rules, rewards and tiers (a table and one form
// each: a new one, or the one chosen to edit), the shop's settings (several forms, each sending only
// its own fields to shopSettingsUpdate) and the Shopify store, all on the
// admin schema's own mutations. Each userError shows beside its field; what a role may change is
// the server's to decide (a refusal shows its message). Uses admin.js's helpers; webhooks.js uses
// this file's. Every value is written as text.
'use strict';

SECTIONS.push('settings');

/**
 * A form's values as a mutation's input: blank fields left out (unchanged on an update), checkboxes
 * as booleans, data-kind int/number as numbers, data-kind lines as a list, `a.b` names nested.
 */
function formInput(form) {
  const input = {};
  for (const el of form.elements) {
    if (!el.name || el.disabled) continue;
    let value;
    if (el.type === 'checkbox') value = el.checked;
    else if (el.dataset.kind === 'lines') value = el.value.split('\n').map((line) => line.trim()).filter(Boolean);
    else if (el.value.trim() === '') continue;
    else value = el.dataset.kind === 'int' || el.dataset.kind === 'number' ? Number(el.value) : el.value.trim();
    const path = el.name.split('.');
    let at = input;
    for (const key of path.slice(0, -1)) at = at[key] ??= {};
    at[path[path.length - 1]] = value;
  }
  return input;
}

/** Puts `values` (an API object) into the form's fields by their (dotted) names. */
function fillForm(form, values) {
  for (const el of form.elements) {
    if (!el.name) continue;
    const value = el.name.split('.').reduce((at, key) => (at == null ? at : at[key]), values);
    if (el.type === 'checkbox') el.checked = Boolean(value);
    else if (el.dataset.kind === 'lines') el.value = (value || []).join('\n');
    else el.value = value ?? '';
  }
}

/**
 * Runs a mutation from `form`: its userErrors beside the fields, or `done` said, the form's old
 * errors cleared and `after()` if given (the screen again). Resolves to the payload when it succeeded.
 */
async function submitMutation(form, field, query, variables, done, after) {
  const result = (await gql(query, variables))[field];
  if (result.userErrors.length) return showUserErrors(form, result.userErrors);
  showUserErrors(form, []);
  say(done, true);
  await after?.();
  return result;
}

/** A table cell's button that runs `action` (guarded); its label names what it acts on, for screen readers. */
function actionButton(text, label, action) {
  const button = document.createElement('button');
  button.type = 'button';
  button.textContent = text;
  button.setAttribute('aria-label', label);
  button.addEventListener('click', guarded(action));
  return button;
}

const USER_ERRORS = 'userErrors { code field message }';

/**
 * The lists the screen edits. Each: its table and form, its items in the query's data, the row's cells, the
 * mutations (an update takes the create's input less `createOnly`, plus the id), and its delete.
 */
const LISTS = [
  {
    what: 'rule', table: '#rules', form: '#rule-form', items: (data) => data.earningRules, id: (r) => r._id,
    cells: (r) => [r.name, r.type, r.earnPoint, r.spent ?? '', r.active ? 'yes' : 'no'],
    create: ['earningRuleCreate', 'EarningRuleCreateInput'], update: ['earningRuleUpdate', 'EarningRuleUpdateInput'], createOnly: ['type'],
    remove: ['earningRuleDelete', `mutation Delete($id: ID!) { earningRuleDelete(id: $id) { ${USER_ERRORS} } }`, (id) => ({ id })],
  },
  {
    what: 'reward', table: '#rewards', form: '#reward-form', items: (data) => data.pointsRedemptions.edges.map((e) => e.node), id: (r) => r._id,
    cells: (r) => [r.name, r.type, r.rewardValue, r.discountValue, r.status ? 'yes' : 'no'],
    create: ['pointsRedemptionCreate', 'PointsRedemptionInput'], update: ['pointsRedemptionUpdate', 'PointsRedemptionUpdateInput'], createOnly: [],
    remove: ['pointsRedemptionDelete', `mutation Delete($input: PointsRedemptionDeleteInput!) { pointsRedemptionDelete(input: $input) { ${USER_ERRORS} } }`, (id) => ({ input: { id } })],
  },
  {
    what: 'tier', table: '#tiers', form: '#tier-form', items: (data) => data.tiers, id: (t) => t.id,
    cells: (t) => [t.name, t.threshold, t.multiplier],
    create: ['tierCreate', 'TierCreateInput'], update: ['tierUpdate', 'TierUpdateInput'], createOnly: [],
    remove: ['tierDelete', `mutation Delete($id: ID!) { tierDelete(id: $id) { ${USER_ERRORS} } }`, (id) => ({ id })],
  },
];

// What the forms of the shop's settings show (form[data-settings]).
const SHOP_SETTINGS = `pendingDays expiry { mode days warningDays } referrerPoints refereePoints storefrontOrigins earnOnTestOrders signUpBonusSince
  tiers { metric window days } codeWarningDays returnPointsOnCodeExpiry returnCodePointsOnRefund
  currency timezone rateLimitPerMinute webhookRetentionDays auditRetentionDays`;

// The first 50 rewards: a wider page costs more of the shop's GraphQL rate limit (docs/api.md).
const SETTINGS = `query Settings {
  earningRules { _id name type earnPoint spent action active }
  pointsRedemptions(first: 50) { edges { node { _id name type rewardValue discountValue status } } }
  tiers { id name threshold multiplier }
  shop {
    settings { ${SHOP_SETTINGS} }
    shopify { shopDomain webhookSecretSet }
    shopifyAdmin { connectedAt auth scopes missingScopes }
  }
}`;

async function showSettings() {
  const data = await gql(SETTINGS);
  show('settings');
  for (const list of LISTS) showList(list, list.items(data));
  for (const form of document.querySelectorAll('form[data-settings]')) fillForm(form, data.shop.settings);
  $('#shopify-domain').value = data.shop.shopify.shopDomain || '';
  $('#shopify-now').textContent = data.shop.shopify.shopDomain
    ? `Orders come from ${data.shop.shopify.shopDomain}${data.shop.shopify.webhookSecretSet ? ', its webhooks signed with the saved secret' : ' (no webhook secret yet)'}.`
    : 'No store yet.';
  const admin = data.shop.shopifyAdmin;
  $('#connect-now').textContent = admin
    ? `Connected ${when(admin.connectedAt)} (${admin.auth}); scopes ${admin.scopes.join(', ') || 'none'}${admin.missingScopes.length ? `; missing ${admin.missingScopes.join(', ')}` : ''}.`
    : 'Not connected: codes are not created in Shopify.';
  $('#disconnect').hidden = !admin;
}
SCREENS.settings = showSettings;

function showList(list, items) {
  $(`${list.table} tbody`).replaceChildren(
    ...items.map((item) => {
      const edit = actionButton('Edit', `Edit the ${list.what} ${item.name}`, () => editItem(list, item));
      const remove = actionButton('Delete', `Delete the ${list.what} ${item.name}`, async () => {
        if (!confirm(`Delete the ${list.what} “${item.name}”?`)) return;
        const [field, query, variables] = list.remove;
        await submitMutation($(list.form), field, query, variables(list.id(item)), `The ${list.what} is deleted.`, showSettings);
      });
      const actions = document.createElement('span');
      actions.append(edit, ' ', remove);
      return row([...list.cells(item), actions]);
    }),
  );
}

function editItem(list, item) {
  const form = $(list.form);
  showUserErrors(form, []);
  fillForm(form, item);
  form.elements.id.value = list.id(item);
  for (const name of list.createOnly) form.elements[name].disabled = true;
  form.querySelector('h3').textContent = `Edit the ${list.what} ${item.name}`;
  form.elements.name.focus();
}

for (const list of LISTS) {
  const form = $(list.form);
  const title = form.querySelector('h3').textContent;
  // Also after a save: the errors go, the message saying it was saved stays.
  form.addEventListener('reset', () => {
    for (const old of form.querySelectorAll('.field-error')) old.remove();
    for (const name of list.createOnly) form.elements[name].disabled = false;
    form.querySelector('h3').textContent = title;
  });
  form.addEventListener('submit', guarded(async (event) => {
    event.preventDefault();
    const input = formInput(form);
    const [field, type] = input.id ? list.update : list.create;
    const saved = await submitMutation(form, field, `mutation Save($input: ${type}!) { ${field}(input: $input) { ${USER_ERRORS} } }`, { input }, `The ${list.what} is saved.`, showSettings);
    if (saved) form.reset();
  }));
}

// Each form of the shop's settings sends its own fields only (saving the codes' settings does not
// send the tiers' again: a tier setting re-evaluates every member), and only it is filled again from
// the answer: what is being typed in another form stays.
for (const form of document.querySelectorAll('form[data-settings]')) {
  form.addEventListener('submit', guarded(async (event) => {
    event.preventDefault();
    const saved = await submitMutation(form, 'shopSettingsUpdate',
      `mutation Save($input: ShopSettingsInput!) { shopSettingsUpdate(input: $input) { settings { ${SHOP_SETTINGS} } ${USER_ERRORS} } }`,
      { input: formInput(form) }, 'The settings are saved.');
    if (saved) fillForm(form, saved.settings);
  }));
}

$('#shopify-form').addEventListener('submit', guarded(async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  const saved = await submitMutation(form, 'shopifySettingsUpdate', `mutation Save($input: ShopifySettingsInput!) { shopifySettingsUpdate(input: $input) { ${USER_ERRORS} } }`,
    { input: formInput(form) }, 'The store is saved.', showSettings);
  if (saved) form.elements.webhookSecret.value = '';
}));

$('#connect-form').addEventListener('submit', guarded(async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  const saved = await submitMutation(form, 'shopifyAdminConnect', `mutation Connect($input: ShopifyAdminConnectInput!) { shopifyAdminConnect(input: $input) { ${USER_ERRORS} } }`,
    { input: formInput(form) }, 'Connected to the Shopify Admin API.', showSettings);
  if (saved) form.reset();
}));

$('#disconnect').addEventListener('click', guarded(async () => {
  if (!confirm('Disconnect the Shopify Admin API? Codes will no longer be created in Shopify.')) return;
  await submitMutation($('#connect-form'), 'shopifyAdminDisconnect', `mutation { shopifyAdminDisconnect { ${USER_ERRORS} } }`, {}, 'Disconnected from Shopify.', showSettings);
}));

// --- Downloads (on the customers screen): the session's cookie opens them ----------------------------

function ledgerLink() {
  const from = $('#export-from').value;
  const to = $('#export-to').value;
  const link = $('#export-ledger');
  link.href = `/rest-api/v1/exports/ledger.csv?${new URLSearchParams({ from, to })}`;
  link.hidden = !(from && to);
}
$('#export-to').valueAsDate = new Date(Date.now() + 86_400_000);
$('#export-from').valueAsDate = new Date(Date.now() - 29 * 86_400_000);
$('#export-from').addEventListener('input', ledgerLink);
$('#export-to').addEventListener('input', ledgerLink);
ledgerLink();
