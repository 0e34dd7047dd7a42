// The console's webhooks screen (#/webhooks): the shop's subscriptions (subscribe, re-enable,
// delete), the signing secret shown once when one is made, and the deliveries newest first, each
// replayable. Uses admin.js's and settings.js's helpers; every value is written as text.
'use strict';

SECTIONS.push('webhooks');

// Page widths kept small: a wide list costs more of the shop's GraphQL rate limit (docs/api.md).
const DELIVERIES_SHOWN = 20;
const SUBSCRIPTIONS_SHOWN = 50;
const WEBHOOKS = `query Webhooks($first: Int!, $subscriptions: Int!) {
  webhookTopics { topic description }
  webhookSubscriptions(first: $subscriptions) { edges { node { id topic callbackUrl status disabledReason } } }
  webhookDeliveries(first: $first) { edges { node { id topic status attemptCount lastResponseStatus lastError createdAt } } }
}`;

async function showWebhooks() {
  const data = await gql(WEBHOOKS, { first: DELIVERIES_SHOWN, subscriptions: SUBSCRIPTIONS_SHOWN });
  show('webhooks');
  const topic = $('#subscription-topic');
  const chosen = topic.value;
  topic.replaceChildren(
    ...data.webhookTopics.map((t) => {
      const option = document.createElement('option');
      option.value = t.topic;
      option.textContent = t.topic;
      option.title = t.description;
      return option;
    }),
  );
  if (chosen) topic.value = chosen;
  $('#subscriptions tbody').replaceChildren(...data.webhookSubscriptions.edges.map(({ node }) => subscriptionRow(node)));
  $('#deliveries tbody').replaceChildren(
    ...data.webhookDeliveries.edges.map(({ node: d }) => {
      const answer = d.lastResponseStatus ? `HTTP ${d.lastResponseStatus}` : d.lastError || '';
      return row([when(d.createdAt), d.topic, d.status, d.attemptCount, answer, actionButton('Replay', `Replay the ${d.topic} delivery of ${when(d.createdAt)}`, () => replay(d))]);
    }),
  );
}
SCREENS.webhooks = showWebhooks;

function subscriptionRow(s) {
  const actions = document.createElement('span');
  if (s.status !== 'enabled') {
    actions.append(actionButton('Enable', `Enable the ${s.topic} subscription to ${s.callbackUrl}`, () =>
      webhookMutation('webhookSubscriptionEnable', 'WebhookSubscriptionEnableInput', { id: s.id }, 'The subscription is enabled.')), ' ');
  }
  actions.append(actionButton('Delete', `Delete the ${s.topic} subscription to ${s.callbackUrl}`, async () => {
    if (!confirm(`Delete the ${s.topic} subscription to ${s.callbackUrl}?`)) return;
    await webhookMutation('webhookSubscriptionDelete', 'WebhookSubscriptionDeleteInput', { id: s.id }, 'The subscription is deleted.');
  }));
  return row([s.topic, s.callbackUrl, s.disabledReason ? `${s.status}: ${s.disabledReason}` : s.status, actions]);
}

/** A subscription's or delivery's mutation by its id; a userError is shown above the screen. */
function webhookMutation(field, type, input, done) {
  return submitMutation($('#subscription-form'), field, `mutation Run($input: ${type}!) { ${field}(input: $input) { ${USER_ERRORS} } }`, { input }, done, showWebhooks);
}

function replay(delivery) {
  return webhookMutation('webhookDeliveryReplay', 'WebhookDeliveryReplayInput', { id: delivery.id }, `The ${delivery.topic} delivery is queued again.`);
}

$('#subscription-form').addEventListener('submit', guarded(async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  const secret = $('#signing-secret');
  secret.hidden = true;
  const made = await submitMutation(form, 'webhookSubscriptionCreate', `mutation Subscribe($input: WebhookSubscriptionCreateInput!) { webhookSubscriptionCreate(input: $input) { signingSecret ${USER_ERRORS} } }`,
    { input: formInput(form) }, 'Subscribed.', showWebhooks);
  if (!made) return;
  form.elements.callbackUrl.value = '';
  const code = document.createElement('code');
  code.id = 'signing-secret-value';
  code.textContent = made.signingSecret;
  secret.replaceChildren('The signing secret, shown this once: keep it where your endpoint checks signatures. ', code);
  secret.hidden = false;
}));

$('#deliveries-refresh').addEventListener('click', guarded(showWebhooks));
