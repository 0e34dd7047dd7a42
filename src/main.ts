// `npm start`: the server, on PGlite in DATA_DIR unless DATABASE_URL is set.
import { buildApp } from './app.js';
import { ConfigError, loadConfig } from './config.js';
import { DataDirLockedError } from './db/data-dir-lock.js';
import type { DB } from './db/database.js';
import { DEMO_OWNER_EMAIL, DEMO_SHOP_NAME, ensureDemoShop } from './demo.js';
import { type StaffLink, staffLinkUrl } from './domain/staff/index.js';
import { listShops } from './domain/shops/index.js';
import { stopOnSignals } from './shutdown.js';

async function main() {
  const config = loadConfig();
  const app = await buildApp(config);
  // Handlers first: a signal that arrives while the banner is being prepared still stops cleanly.
  stopOnSignals(app);
  const url = await app.start();
  app.logger.info({ url, database: app.database.kind }, 'loyalty service listening');
  const demo = app.database.kind === 'pglite' ? await ensureDemoShop(app.database.db) : null;
  const lines = demo ? demoLines(url, config.publicUrl, demo.apiKey, demo.ownerInvite) : [];
  lines.push(...(await keyHelpLines(app.database.db, app.database.kind)));
  process.stdout.write(`${['', ...lines, ''].join('\n')}\n`);
}

function demoLines(url: string, publicUrl: string | null, apiKey: string, ownerInvite: StaffLink): string[] {
  return [
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
    `GraphiQL: ${url}/graphql   REST reference: ${url}/docs   program page: ${url}/dashboard`,
    '',
    `Staff console: the demo shop's owner is ${DEMO_OWNER_EMAIL}, by this one-time link (72 h; docs/console.md):`,
    `  ${staffLinkUrl(publicUrl ?? url, 'invite', ownerInvite)}`,
    `  or: curl -s -X POST ${url}/admin/invites/accept -H 'Content-Type: application/json' \\`,
    `    -d '{"token":"${ownerInvite.token}","name":"Demo owner","password":"<10 characters or more>"}'`,
    '',
  ];
}

/**
 * Printed on every start, never with a key: which shop to use and how to get a new key for it,
 * so a lost key (the demo one is shown once) is never a dead end. The CLI cannot open an embedded
 * data folder while this server holds it, so there the way out says to stop the server first.
 */
async function keyHelpLines(db: DB, kind: 'pglite' | 'postgres'): Promise<string[]> {
  const shops = await listShops(db);
  if (shops.length === 0) {
    return [
      'No shop yet. Create the first one and its API key (shown once):',
      '  npm run cli -- shop create --name "My shop"',
      'then its staff console\'s first owner (a one-time link): npm run cli -- staff invite-owner --shop "My shop" --email <address>',
    ];
  }
  const demo = kind === 'pglite' ? shops.find((s) => s.name === DEMO_SHOP_NAME) : undefined;
  const shop = demo ?? (shops.length === 1 ? shops[0] : undefined);
  const lines = shop
    ? [
        `${demo ? 'Demo shop' : 'Shop'}: "${shop.name}", id ${shop.id} (${shop.activeKeys} active API key(s)).`,
        `A new API key for it: npm run cli -- key create --shop ${shop.id}`,
        `An owner for its staff console (a one-time link): npm run cli -- staff invite-owner --shop ${shop.id} --email <address>`,
      ]
    : [
        `${shops.length} shops: npm run cli -- shop list`,
        'A new API key: npm run cli -- key create --shop <id or name>',
        'An owner for a staff console: npm run cli -- staff invite-owner --shop <id or name> --email <address>',
      ];
  if (kind === 'pglite') {
    lines.push(
      '  (stop this server first: the CLI needs the data folder to itself; or, with a key that still works,',
      '  send the GraphQL mutation apiKeyCreate, see docs/api.md)',
    );
  }
  return lines;
}

main().catch((err) => {
  if (err instanceof ConfigError || err instanceof DataDirLockedError) {
    process.stderr.write(`${err.message}\n`);
  } else {
    process.stderr.write(`failed to start: ${err instanceof Error ? err.stack : String(err)}\n`);
  }
  process.exit(1);
});
