// Replays Shopify webhooks (an order history, or a test store's events) into the Shopify connector,
// signed as Shopify signs them, and prints what each order earned.
//
//   LOYALTY_URL=http://127.0.0.1:3000 SHOPIFY_SHOP_DOMAIN=my-shop.myshopify.com \
//   SHOPIFY_WEBHOOK_SECRET=... [LOYALTY_API_KEY=lk_...] \
//     node --import tsx examples/shopify-replay.ts examples/shopify-sample.ndjson
//
// Each line of the file is one webhook, {"topic": "orders/paid", "body": {...}}, with the body in
// Shopify's Admin REST shape (Order, Refund or Customer); a bare Order is sent as orders/updated.
// The webhook id is derived from the line, so replaying the same file again is dropped as duplicates.
// Bodies are re-sent with every digit (lossless-json): Shopify's ids pass 2^53, which JSON.parse rounds.
// With LOYALTY_API_KEY the script waits until the service has applied them and prints each order.
import { createHash, createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parse, stringify } from 'lossless-json';

const baseUrl = (process.env.LOYALTY_URL ?? 'http://127.0.0.1:3000').replace(/\/$/, '');
const { SHOPIFY_SHOP_DOMAIN: shopDomain, SHOPIFY_WEBHOOK_SECRET: secret, LOYALTY_API_KEY: apiKey } = process.env;
const [file] = process.argv.slice(2);
if (!shopDomain || !secret || !file) {
  console.error('usage: LOYALTY_URL=… SHOPIFY_SHOP_DOMAIN=… SHOPIFY_WEBHOOK_SECRET=… [LOYALTY_API_KEY=lk_…] node --import tsx examples/shopify-replay.ts <file.ndjson>');
  process.exit(64);
}

/** Numbers are lossless-json's LosslessNumber: their text, exactly as in the file. */
type Webhook = { topic: string; body: { id?: unknown; order_id?: unknown } };

const webhooks: Webhook[] = readFileSync(file, 'utf8')
  .split('\n')
  .filter((line) => line.trim())
  .map((line) => {
    const parsed = parse(line) as Webhook | Webhook['body'];
    return 'topic' in parsed && 'body' in parsed ? (parsed as Webhook) : { topic: 'orders/updated', body: parsed as Webhook['body'] };
  });

/** One delivery, as Shopify makes it: the raw body, its base64 HMAC-SHA256, the shop's domain, a webhook id. */
async function deliver(webhook: Webhook): Promise<{ webhookId: string; status: string }> {
  const raw = stringify(webhook.body)!;
  const webhookId = createHash('sha256').update(`${webhook.topic}\n${raw}`).digest('hex').slice(0, 32);
  const res = await fetch(`${baseUrl}/integrations/shopify/webhooks`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-shopify-topic': webhook.topic,
      'x-shopify-shop-domain': shopDomain!,
      'x-shopify-webhook-id': webhookId,
      'x-shopify-hmac-sha256': createHmac('sha256', secret!).update(raw).digest('base64'),
      'x-shopify-triggered-at': new Date().toISOString(),
    },
    body: raw,
  });
  const answer = (await res.json()) as { status?: string; error?: string; message: string };
  if (!res.ok) throw new Error(`${res.status} ${answer.error}: ${answer.message}`);
  return { webhookId, status: answer.status! };
}

const counts: Record<string, number> = { accepted: 0, duplicate: 0, rejected: 0 };
const orderIds = new Set<string>();
const sent: string[] = [];
for (const webhook of webhooks) {
  const { webhookId, status } = await deliver(webhook);
  counts[status] = (counts[status] ?? 0) + 1;
  sent.push(webhookId);
  const orderId = webhook.topic.startsWith('orders/') ? webhook.body.id : webhook.topic === 'refunds/create' ? webhook.body.order_id : undefined;
  if (orderId !== undefined) orderIds.add(String(orderId));
  console.log(`${webhook.topic} ${String(webhook.body.id ?? '')}: ${status}`);
}
console.log(`Sent ${webhooks.length} webhook(s): ${counts.accepted} accepted, ${counts.duplicate} duplicate, ${counts.rejected} rejected.`);
if (!apiKey) process.exit(0);

type Listed = { webhookId: string; topic: string; status: string; error: string | null };

async function listed(): Promise<Listed[]> {
  const res = await fetch(`${baseUrl}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ query: '{ shop { shopifyWebhooks(first: 250) { edges { node { webhookId topic status error } } } } }' }),
  });
  const body = (await res.json()) as { data: { shop: { shopifyWebhooks: { edges: Array<{ node: Listed }> } } } };
  return body.data.shop.shopifyWebhooks.edges.map((e) => e.node).filter((w) => sent.includes(w.webhookId));
}

// The service applies stored webhooks within about a second; wait for ours (up to 30 s).
const deadline = Date.now() + 30_000;
let mine = await listed();
while (mine.some((w) => w.status === 'waiting') && Date.now() < deadline) {
  await new Promise((resolve) => setTimeout(resolve, 250));
  mine = await listed();
}
for (const w of mine.filter((w) => w.status !== 'applied' || w.error)) console.log(`${w.topic} ${w.status}: ${w.error}`);
for (const orderId of orderIds) {
  const res = await fetch(`${baseUrl}/rest-api/v1/orders/${orderId}`, { headers: { authorization: `Bearer ${apiKey}` } });
  if (res.status !== 200) {
    console.log(`Order ${orderId}: not recorded`);
    continue;
  }
  const { order } = (await res.json()) as { order: { status: string; total: string; refunded: string; pointsEarned: number; pointsPending: number; pointsClawedBack: number } };
  console.log(`Order ${orderId}: ${order.status}, total ${order.total}, refunded ${order.refunded}: ${order.pointsEarned} points (${order.pointsPending} pending, ${order.pointsClawedBack} clawed back)`);
}
process.exit(mine.some((w) => w.status === 'waiting') ? 1 : 0);
