// The storefront widget's logic (index.html): one GraphQL endpoint, one token, no libraries.
const params = new URLSearchParams(location.hash.slice(1));
const $ = (id) => document.getElementById(id);
let api = params.get('api');
let token = params.get('token');

const ME = `{ me { points pendingPoints tier { tier { name } } tierProgress { current next { name threshold } remaining } }
  rewards(first: 10) { edges { node { _id name rewardValue redeemable } } } }`;
const REDEEM = `mutation($input: RedeemInput!) { redeem(input: $input) {
  discountCode { code } customer { points } userErrors { code message } } }`;

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

function showCustomer(me) {
  $('balance').textContent = `${me.points.toLocaleString('en')} points`;
  $('pending').textContent = me.pendingPoints > 0 ? `${me.pendingPoints} more on their way from recent orders` : '';
  $('tier-name').textContent = me.tier ? `Tier: ${me.tier.tier.name}` : 'No tier yet';
  const { current, next, remaining } = me.tierProgress;
  $('tier').hidden = !me.tier && !next;
  if (next) {
    $('tier-progress').max = Number(next.threshold);
    $('tier-progress').value = Number(current);
    $('tier-next').textContent = `${remaining} to ${next.name}`;
  } else {
    $('tier-progress').max = 1;
    $('tier-progress').value = 1;
    $('tier-next').textContent = 'Top tier reached';
  }
}

function showRewards(rewards, points) {
  const list = $('rewards');
  list.replaceChildren();
  for (const { node } of rewards.edges) {
    const item = document.createElement('li');
    const label = document.createElement('span');
    label.textContent = `${node.name} · ${node.rewardValue} points`;
    const button = document.createElement('button');
    button.textContent = 'Redeem';
    button.disabled = points < node.rewardValue;
    button.dataset.reward = node._id;
    button.setAttribute('aria-label', `Redeem ${node.name} for ${node.rewardValue} points`);
    button.addEventListener('click', () => redeem(node, button));
    item.append(label, button);
    list.append(item);
  }
}

async function refresh() {
  const data = await graphql(ME);
  showCustomer(data.me);
  showRewards(data.rewards, data.me.points);
}

async function redeem(reward, button) {
  button.disabled = true;
  $('result').textContent = '';
  try {
    // One key per click: a retry after a lost answer cannot spend the points twice.
    const { redeem: result } = await graphql(REDEEM, { input: { rewardId: reward._id, pointsAmount: reward.rewardValue } }, { 'idempotency-key': crypto.randomUUID() });
    if (result.userErrors.length) throw new Error(result.userErrors[0].message);
    $('result').innerHTML = '';
    const code = document.createElement('span');
    code.className = 'code';
    code.id = 'discount-code';
    code.textContent = result.discountCode.code;
    $('result').append(`${reward.name}: use `, code, ' at checkout.');
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
