// The storefront widget's logic (index.html): one GraphQL endpoint, one token, no libraries.
const params = new URLSearchParams(location.hash.slice(1));
const $ = (id) => document.getElementById(id);
let api = params.get('api');
let token = params.get('token');

const ME = `{ me { points pendingPoints tier { tier { name } } tierProgress { current next { name threshold } remaining metric currency } }
  rewards(first: 10) { edges { node { _id name type rewardValue redeemable applyVariants } } } }`;
const REDEEM = `mutation($input: RedeemInput!) { redeem(input: $input) {
  discountCode { code } customer { points } userErrors { code field message } } }`;

/** One operation; a transport, HTTP or GraphQL error becomes an Error with the server's message. */
async function graphql(query, variables, headers = {}) {
  const res = await fetch(`${api}/storefront/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, ...headers },
    body: JSON.stringify({ query, variables }),
  });
  const body = await res.json();
  if (body.errors?.length) throw new Error(body.errors[0].message);
  return body.data;
}

const points = (n) => `${Number(n).toLocaleString('en')} points`;

/**
 * A tier amount in its unit: points, or money in the shop's currency ("$215.03", "¥2,150"). The
 * amount is a decimal string; Intl formats the string itself, so no float rounds it.
 */
function tierAmount(value, { metric, currency }) {
  return metric === 'amount_spent' ? new Intl.NumberFormat('en', { style: 'currency', currency }).format(value) : points(value);
}

function showCustomer(me) {
  $('balance').textContent = points(me.points);
  $('pending').textContent = me.pendingPoints > 0 ? `${me.pendingPoints} more on their way from recent orders` : '';
  $('tier-name').textContent = me.tier ? `Tier: ${me.tier.tier.name}` : 'No tier yet';
  const progress = me.tierProgress;
  const { current, next, remaining } = progress;
  $('tier').hidden = !me.tier && !next;
  if (next) {
    $('tier-progress').max = Number(next.threshold);
    $('tier-progress').value = Number(current);
    $('tier-next').textContent = `${tierAmount(remaining, progress)} to ${next.name}`;
  } else {
    $('tier-progress').max = 1;
    $('tier-progress').value = 1;
    $('tier-next').textContent = 'Top tier reached';
  }
}

/**
 * A free product is redeemed for one variant: the reward's only one, or the one the customer picks
 * from those it offers. A reward that names products but no variants takes any variant of them, so
 * the customer gives its id (a real storefront would offer the product's variants from its catalog).
 * Returns the control to show (or null) and how to read the chosen variant; `previous` is what the
 * customer had chosen before the list was drawn again (after every change, live ones included).
 */
function variantChoice(reward, previous) {
  if (reward.type !== 'free_product') return { control: null, chosen: () => undefined };
  const variants = reward.applyVariants;
  if (variants.length === 1) return { control: null, chosen: () => variants[0] };
  const label = `Variant of ${reward.name}`;
  let control;
  if (variants.length > 1) {
    control = document.createElement('select');
    control.setAttribute('aria-label', label);
    for (const id of variants) control.append(new Option(id, id));
  } else {
    control = document.createElement('input');
    control.setAttribute('aria-label', `${label} (variant id)`);
    control.placeholder = 'variant id';
  }
  control.dataset.variantOf = reward._id;
  if (previous !== undefined) control.value = previous;
  return { control, chosen: () => control.value.trim() || undefined };
}

function showRewards(rewards) {
  const list = $('rewards');
  const chosen = new Map([...list.querySelectorAll('[data-variant-of]')].map((control) => [control.dataset.variantOf, control.value]));
  list.replaceChildren();
  for (const { node } of rewards.edges) {
    const item = document.createElement('li');
    const label = document.createElement('span');
    label.textContent = `${node.name} · ${points(node.rewardValue)}`;
    const variant = variantChoice(node, chosen.get(node._id));
    const button = document.createElement('button');
    button.textContent = 'Redeem';
    button.disabled = !node.redeemable;
    button.dataset.reward = node._id;
    button.setAttribute('aria-label', `Redeem ${node.name} for ${node.rewardValue} points`);
    button.addEventListener('click', () => redeem(node, variant.chosen(), button));
    item.append(label, ...(variant.control ? [variant.control] : []), button);
    list.append(item);
  }
}

async function refresh() {
  const data = await graphql(ME);
  showCustomer(data.me);
  showRewards(data.rewards);
}

/** A refusal as the customer should read it: the field at fault first ("variantId: required"). */
const refusal = ({ field, message }) => (field?.length ? `${field.at(-1)}: ${message}` : message);

async function redeem(reward, variantId, button) {
  button.disabled = true;
  $('result').textContent = '';
  $('status').textContent = '';
  try {
    // One key per click: a retry after a lost answer cannot spend the points twice.
    const input = { rewardId: reward._id, pointsAmount: reward.rewardValue, variantId };
    const { redeem: result } = await graphql(REDEEM, { input }, { 'idempotency-key': crypto.randomUUID() });
    if (result.userErrors.length) throw new Error(result.userErrors.map(refusal).join('; '));
    $('result').innerHTML = '';
    const code = document.createElement('span');
    code.className = 'code';
    code.id = 'discount-code';
    code.textContent = result.discountCode.code;
    $('result').append(`${reward.name}${variantId ? ` (${variantId})` : ''}: use `, code, ' at checkout.');
  } catch (err) {
    $('status').textContent = err.message;
  }
  await refresh();
}

/** meChanged over GraphQL-over-SSE (a POST whose answer is a stream): the balance follows every change, wherever it comes from. */
async function listen() {
  for (;;) {
    try {
      const res = await fetch(`${api}/storefront/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${token}` },
        body: JSON.stringify({ query: 'subscription { meChanged { points } }' }),
      });
      if (!res.ok || !res.body) throw new Error(`live updates refused (${res.status})`);
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (block.startsWith('event: next')) await refresh();
        }
      }
      return; // the server ended it: the token expired or was revoked
    } catch (err) {
      $('status').textContent = err.message;
      await new Promise((resolve) => setTimeout(resolve, 5_000));
    }
  }
}

async function start() {
  $('connect').hidden = true;
  try {
    await refresh();
    $('widget').hidden = false;
    $('status').textContent = '';
    document.body.dataset.ready = 'true';
    void listen();
  } catch (err) {
    // A refused origin surfaces as a network error: the browser withholds the answer.
    $('status').textContent = `Could not load your rewards: ${err.message}`;
    document.body.dataset.ready = 'failed';
  }
}

if (api && token) {
  void start();
} else {
  $('connect').hidden = false;
  $('connect').addEventListener('submit', (event) => {
    event.preventDefault();
    api = $('api').value.replace(/\/$/, '');
    token = $('token').value.trim();
    void start();
  });
}
