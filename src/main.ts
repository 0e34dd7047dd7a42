// `npm start`: the server, on PGlite in DATA_DIR unless DATABASE_URL is set.
import { buildApp } from './app.js';
import { ConfigError, loadConfig } from './config.js';
import { DataDirLockedError } from './db/data-dir-lock.js';
import { ensureDemoShop } from './domain/demo.js';
import { stopOnSignals } from './shutdown.js';

async function main() {
  const config = loadConfig();
  const app = await buildApp(config);
  const url = await app.start();
  app.logger.info({ url, database: app.database.kind }, 'loyalty service listening');
  if (app.database.kind === 'pglite') {
    const demo = await ensureDemoShop(app.database.db);
    if (demo) printDemo(url, demo.apiKey);
  }

  stopOnSignals(app);
}

function printDemo(url: string, apiKey: string) {
  const lines = [
    '',
    'A demo shop was created on this empty database. Its API key (shown once):',
    `  ${apiKey}`,
    '',
    'Try:',
    `  curl -s -X POST ${url}/rest-api/v1/points/add -H 'Authorization: Bearer ${apiKey}' \\`,
    `    -H 'Content-Type: application/json' -d '{"customerIdentifier":"demo-1001","amount":50,"description":"welcome"}'`,
    '',
    `  curl -s ${url}/graphql -H 'Authorization: Bearer ${apiKey}' -H 'Content-Type: application/json' \\`,
    `    -d '{"query":"{ customer(identifier: \\"ada@example.com\\") { email points } }"}'`,
    '',
    `GraphiQL: ${url}/graphql   REST reference: ${url}/docs   live events: ${url}/dashboard`,
    '',
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

main().catch((err) => {
  if (err instanceof ConfigError || err instanceof DataDirLockedError) {
    process.stderr.write(`${err.message}\n`);
  } else {
    process.stderr.write(`failed to start: ${err instanceof Error ? err.stack : String(err)}\n`);
  }
  process.exit(1);
});
