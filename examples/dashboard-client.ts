// A terminal dashboard: one graphql-ws subscription printing the shop's events as they commit,
// the same stream the live events of GET /dashboard show in a browser.
//
//   LOYALTY_URL=http://127.0.0.1:3000 LOYALTY_API_KEY=lk_... \
//     node --import tsx examples/dashboard-client.ts ['points/*' 'redemptions/created' …]
//
// Without topics it follows every group of the webhook topic catalog. Prints one line per event:
// `<timestamp> <topic> <event id> <data as JSON>`. Reconnects after network trouble or a server
// restart (events meanwhile are not replayed: webhooks are the durable channel); a refused key
// (close code 4403) ends it.
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';

const baseUrl = (process.env.LOYALTY_URL ?? 'http://127.0.0.1:3000').replace(/\/$/, '');
const apiKey = process.env.LOYALTY_API_KEY;
if (!apiKey) {
  console.error("usage: LOYALTY_URL=… LOYALTY_API_KEY=lk_… node --import tsx examples/dashboard-client.ts ['points/*' …]");
  process.exit(64);
}

const client = createClient({
  url: `${baseUrl.replace(/^http/, 'ws')}/graphql`,
  webSocketImpl: WebSocket,
  connectionParams: { Authorization: `Bearer ${apiKey}` },
  retryAttempts: Infinity,
  shouldRetry: (event) => (event as { code?: number } | undefined)?.code !== 4403,
  on: {
    connected: () => console.error(`connected to ${baseUrl}`),
    closed: (event) => {
      const code = (event as { code?: number }).code;
      if (code === 4403) {
        console.error('the server refused the API key');
        process.exit(1);
      }
    },
  },
});

/** Runs one query or subscription; `onData` gets each result's data. Resolves when it completes. */
function run<T>(query: string, variables: Record<string, unknown>, onData: (data: T) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    client.subscribe<T>(
      { query, variables },
      {
        next: (result) => {
          if (result.errors?.length) reject(new Error(result.errors.map((e) => e.message).join('; ')));
          else if (result.data) onData(result.data);
        },
        error: (err) => reject(err instanceof Error ? err : new Error(JSON.stringify(err))),
        complete: resolve,
      },
    );
  });
}

/** `group/*` for every group of the catalog. */
async function allTopicGroups(): Promise<string[]> {
  let topics: string[] = [];
  await run<{ webhookTopics: Array<{ topic: string }> }>('{ webhookTopics { topic } }', {}, (data) => {
    topics = data.webhookTopics.map((t) => t.topic);
  });
  return [...new Set(topics.map((topic) => `${topic.split('/')[0]}/*`))];
}

type LoyaltyEvent = { id: string; type: string; timestamp: string; shopId: string; data: unknown };

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const topics = args.length ? args : await allTopicGroups();
  console.error(`following ${topics.join(', ')}`);
  await run<{ events: LoyaltyEvent }>(
    'subscription Live($topics: [String!]!) { events(topics: $topics) { id type timestamp shopId data } }',
    { topics },
    ({ events: e }) => console.log(`${e.timestamp} ${e.type} ${e.id} ${JSON.stringify(e.data)}`),
  );
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void client.dispose();
    process.exit(0);
  });
}

main().catch((err: Error) => {
  console.error(err.message);
  process.exit(1);
});
