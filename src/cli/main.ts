// `npm run cli -- …`: shops (their archive and deletion), API keys, migrations, the customers and orders imports, the imports from other programs and the Shopify history import, on the server's database.
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { access, constants } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { Presets, SingleBar } from 'cli-progress';
import { Command, InvalidArgumentError } from 'commander';
import { ConfigError, loadConfig } from '../config.js';
import { DataDirLockedError } from '../db/data-dir-lock.js';
import { type DatabaseHandle, type DB, openDatabase } from '../db/database.js';
import { migrateToLatest } from '../db/migrate.js';
import {
  DEFAULT_REPORT_LIMIT, importCustomers, importOrders, importPeerCustomers, type ImportRejection, type ImportResult, ORDER_IMPORT_POOL_SIZE,
  type OrdersImportResult, PARALLEL_BATCHES, PEER_SOURCES, type PeerImportResult, type PeerSource,
} from '../domain/imports/index.js';
import { DomainError, type FailureFilter, listFailures, retrySetAside } from '../domain/kernel/index.js';
import { parseShopifyJson } from '../domain/shopify/index.js';
import { cancelShopDeletion, requestShopDeletion, writeShopArchive } from '../domain/shop-exit/index.js';
import { createStaffInvite, staffLinkUrl } from '../domain/staff/index.js';
import { type ApiKeyInfo, createApiKey, createShop, findShop, listApiKeys, listShops, revokeApiKey } from '../domain/shops/index.js';
import { DEFAULT_IMPORT_BATCH, type HistoryImportResult, importShopifyHistory } from '../shopify-admin/history-import.js';
import { createSecretBox, loadSecretsKey } from '../webhooks/secret-box.js';
import { countRecords, detectFormat, ImportFileError, ORDER_COLUMNS, PEER_COLUMNS, readImportFile } from './import-file.js';

const program = new Command('loyalty')
  .description('Administration of the loyalty service, on the database the server uses (DATABASE_URL or DATA_DIR).')
  .option('--json', 'print machine-readable JSON on stdout (errors too)')
  .showHelpAfterError();

const json = () => program.opts().json === true;

/** One result: a line (or a few) for people, one JSON document with --json. */
function print(human: string, machine: unknown): void {
  process.stdout.write(json() ? `${JSON.stringify(machine)}\n` : `${human}\n`);
}

/** Opens the configured database, brings its schema up to date, runs `fn`, and closes it. */
async function withDatabase<T>(
  fn: (db: DB, appliedMigrations: string[], database: DatabaseHandle) => Promise<T>,
  poolSize = 2,
): Promise<T> {
  const config = loadConfig();
  const database = await openDatabase({
    url: config.databaseUrl,
    dataDir: config.dataDir, // used only without a url
    poolSize,
  });
  try {
    const applied = await migrateToLatest(database.db);
    return await fn(database.db, applied, database);
  } finally {
    await database.close();
  }
}

const keyPrefix = (key: ApiKeyInfo) => `lk_${key.prefix}`;

/** `--shop` takes what `shop list` shows: the id, or the name when no other shop has it. */
const SHOP_OPTION = ['--shop <id or name>', 'shop id, or its name (as `shop list` shows them)'] as const;

/** `customers import` finished but refused some lines (listed in its output); 1 stays "failed". */
const EXIT_LINES_REJECTED = 2;

function nonEmpty(value: string): string {
  const trimmed = value.trim();
  if (!trimmed) throw new InvalidArgumentError('must not be empty');
  return trimmed;
}

function batchSize(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 5000) throw new InvalidArgumentError('must be an integer from 1 to 5000');
  return n;
}

const shop = program.command('shop').description('shops');

shop
  .command('create')
  .description('create a shop and its first API key (shown once)')
  .requiredOption('--name <name>', 'shop name', nonEmpty)
  .action(async (opts: { name: string }) => {
    const { shop: created, apiKey } = await withDatabase((db) => createShop(db, opts.name));
    print(
      `Created shop "${created.name}" with id ${created.id}.\nAPI key (shown only now, store it safely):\n  ${apiKey}`,
      { shopId: created.id, apiKey },
    );
  });

shop
  .command('list')
  .description('list the shops: ids, names, creation dates and how many API keys work (never a key)')
  .action(async () => {
    const shops = await withDatabase((db) => listShops(db));
    const lines = shops.map((s) => `${s.id}  ${JSON.stringify(s.name)}  created ${s.createdAt.toISOString()}  ${s.activeKeys} active key(s)`);
    print(lines.length ? lines.join('\n') : 'No shops yet: npm run cli -- shop create --name "My shop"', {
      shops: shops.map((s) => ({ shopId: s.id, name: s.name, createdAt: s.createdAt, activeKeys: s.activeKeys })),
    });
  });

shop
  .command('export')
  .description("write everything of a shop to one gzip'd NDJSON archive (a header line, then a line per row; secrets left out), in constant memory")
  .requiredOption(...SHOP_OPTION)
  .requiredOption('--out <file>', 'the archive to write (e.g. shop.ndjson.gz); an existing file is replaced')
  .action(async (opts: { shop: string; out: string }) => {
    const { shopId, counts } = await withDatabase(async (db) => {
      const { id } = await findShop(db, opts.shop);
      const gzip = createGzip();
      const written = pipeline(gzip, createWriteStream(opts.out));
      // Waits for the file when gzip's buffer is full: memory stays a page of rows.
      const write = async (line: string) => {
        if (!gzip.write(`${line}\n`)) await once(gzip, 'drain');
      };
      try {
        const counts = await writeShopArchive(db, id, write);
        gzip.end();
        await written;
        return { shopId: id, counts };
      } catch (err) {
        gzip.destroy();
        await written.catch(() => undefined);
        throw err;
      }
    });
    const rows = Object.values(counts).reduce((a, b) => a + b, 0);
    print(`Wrote ${rows} row(s) of shop ${shopId} from ${Object.keys(counts).length} table(s) to ${opts.out}.`, { shopId, file: opts.out, rows, tables: counts });
  });

shop
  .command('delete')
  .description(
    'schedule the deletion of a shop and every row of it after the grace period (SHOP_DELETION_GRACE_DAYS, 7 days), ' +
      'during which it keeps working and the deletion can be cancelled with --cancel; export it first (shop export)',
  )
  .requiredOption(...SHOP_OPTION)
  .option('--cancel', 'cancel a deletion still in its grace period')
  .action(async (opts: { shop: string; cancel?: boolean }) => {
    const config = loadConfig();
    const deletion = await withDatabase(async (db) => {
      const { id } = await findShop(db, opts.shop);
      return opts.cancel ? cancelShopDeletion(db, id) : requestShopDeletion(db, id, { reason: 'requested', graceDays: config.shopDeletionGraceDays });
    });
    print(
      opts.cancel
        ? `Cancelled the deletion of shop ${deletion.shopId}; nothing of it was deleted.`
        : `Shop ${deletion.shopId} will be deleted from ${deletion.dueAt.toISOString()} on, by the server's scheduler; until then \`shop delete --cancel\` keeps it.`,
      deletion,
    );
  });

const key = program.command('key').description('API keys');

key
  .command('create')
  .description('create another API key for a shop (shown once)')
  .requiredOption(...SHOP_OPTION)
  .action(async (opts: { shop: string }) => {
    const { shopId, apiKey, key: info } = await withDatabase(async (db) => {
      const { id } = await findShop(db, opts.shop);
      return { shopId: id, ...(await createApiKey(db, id)) };
    });
    print(`New API key ${keyPrefix(info)} for shop ${shopId} (shown only now, store it safely):\n  ${apiKey}`, {
      shopId,
      apiKey,
      prefix: keyPrefix(info),
      createdAt: info.createdAt,
    });
  });

key
  .command('revoke')
  .description('revoke an API key; requests with it get 401 from then on')
  .requiredOption(...SHOP_OPTION)
  .requiredOption('--key <prefix>', 'the key, or its prefix as `key list` shows it')
  .action(async (opts: { shop: string; key: string }) => {
    const { shopId, info, alreadyRevoked } = await withDatabase(async (db) => {
      const { id } = await findShop(db, opts.shop);
      const prefix = opts.key.replace(/^lk_/, '').slice(0, 10);
      const before = (await listApiKeys(db, id)).find((k) => k.prefix === prefix);
      return { shopId: id, info: await revokeApiKey(db, id, opts.key), alreadyRevoked: before?.revokedAt != null };
    });
    print(
      alreadyRevoked
        ? `API key ${keyPrefix(info)} of shop ${shopId} was already revoked, at ${info.revokedAt!.toISOString()}.`
        : `Revoked API key ${keyPrefix(info)} of shop ${shopId}.`,
      { prefix: keyPrefix(info), revokedAt: info.revokedAt, alreadyRevoked },
    );
  });

key
  .command('list')
  .description("list a shop's API keys: prefixes and dates, never the secrets")
  .requiredOption(...SHOP_OPTION)
  .action(async (opts: { shop: string }) => {
    const keys = await withDatabase(async (db) => listApiKeys(db, (await findShop(db, opts.shop)).id));
    const lines = keys.map(
      (k) =>
        `${keyPrefix(k)}  created ${k.createdAt.toISOString()}  ${k.revokedAt ? `revoked ${k.revokedAt.toISOString()}` : 'active'}`,
    );
    print(lines.length ? lines.join('\n') : `Shop ${opts.shop} has no API keys.`, {
      keys: keys.map((k) => ({ prefix: keyPrefix(k), createdAt: k.createdAt, revokedAt: k.revokedAt })),
    });
  });

const staff = program.command('staff').description('people who sign in to the console (docs/console.md)');

staff
  .command('invite-owner')
  .description("print a one-time link (72 h) that makes the e-mail an owner of the shop: how a shop gets its first owner")
  .requiredOption(...SHOP_OPTION)
  .requiredOption('--email <address>', 'who the link is for; they choose their password when they open it', nonEmpty)
  .action(async (opts: { shop: string; email: string }) => {
    const config = loadConfig();
    // No password on the command line (shell history, ps): the person sets it on the link's page.
    const { shopId, link } = await withDatabase(async (db) => {
      const { id } = await findShop(db, opts.shop);
      return { shopId: id, link: await createStaffInvite(db, id, { email: opts.email, role: 'owner' }, new Date()) };
    });
    const url = staffLinkUrl(config.publicUrl ?? `http://${config.host}:${config.port}`, 'invite', link);
    print(`One-time owner invite for ${opts.email} in shop ${shopId}, valid until ${link.expiresAt.toISOString()}:\n  ${url}`, {
      shopId,
      email: opts.email,
      link: url,
      expiresAt: link.expiresAt,
    });
  });

program
  .command('db')
  .description('database')
  .command('migrate')
  .description('apply pending migrations (the server also does this on start)')
  .action(async () => {
    const applied = await withDatabase(async (_db, migrations) => migrations);
    print(applied.length ? `Applied ${applied.join(', ')}.` : 'The database is up to date.', { applied });
  });

const dueWork = program.command('due-work').description('scheduled work (Shopify webhooks, pending points, expiry, birthdays, tiers): items whose tries failed');
const KIND_OPTION = ['--kind <kind>', 'one kind: shopify_inbox, pending_points, point_expiry, expiry_warnings, birthdays or tier_evaluation'] as const;

/** The --shop and --kind filters of the due-work commands, the shop found as `shop list` shows it. */
async function failureFilter(db: DB, opts: { kind?: string; shop?: string; item?: string }): Promise<FailureFilter> {
  return { kind: opts.kind, shopId: opts.shop ? (await findShop(db, opts.shop)).id : undefined, item: opts.item };
}

dueWork
  .command('failed')
  .description('list the items set aside after their last try (with --all, also those waiting for their next), oldest first')
  .option(...KIND_OPTION)
  .option(...SHOP_OPTION)
  .option('--all', 'also the items waiting for their next try')
  .action(async (opts: { kind?: string; shop?: string; all?: boolean }) => {
    const failures = await withDatabase(async (db) => listFailures(db, await failureFilter(db, opts), { all: opts.all }));
    const lines = failures.map(
      (f) =>
        `${f.kind}  ${f.item}  shop ${f.shopId}  ${f.attempts} tries  ${f.setAsideAt ? `set aside ${f.setAsideAt.toISOString()}` : `next try ${f.nextAttemptAt.toISOString()}`}\n  ${f.reason}`,
    );
    print(lines.length ? lines.join('\n') : 'Nothing is set aside.', { failures });
  });

dueWork
  .command('retry')
  .description('give the items set aside their tries again, once their cause is fixed: the next pass of a worker claims them')
  .option(...KIND_OPTION)
  .option(...SHOP_OPTION)
  .option('--item <id>', 'one item, as `due-work failed` shows it')
  .action(async (opts: { kind?: string; shop?: string; item?: string }) => {
    const retried = await withDatabase(async (db) => retrySetAside(db, await failureFilter(db, opts)));
    print(retried ? `${retried} item(s) will be tried again at the next pass.` : 'Nothing set aside matched.', { retried });
  });

program
  .command('customers')
  .description('customers')
  .command('import')
  .description(
    'upsert customers by shopifyCustomerId from NDJSON or CSV (header row) with the fields ' +
      'shopifyCustomerId, email, points, birthday, referredBy; bad lines are reported and skipped',
  )
  .argument('<file>', 'a .ndjson/.jsonl or .csv file (other names: detected from the content)')
  .requiredOption(...SHOP_OPTION)
  .option('--batch-size <rows>', 'rows per transaction', batchSize, 1000)
  .action(async (file: string, opts: { shop: string; batchSize: number }) => {
    await access(file, constants.R_OK).catch((err: Error) => {
      throw new ImportFileError(`cannot read ${file}: ${err.message}`);
    });
    const format = await detectFormat(file);
    // A bar only for a person watching a terminal; stdout stays clean for the result.
    const bar = process.stderr.isTTY
      ? new SingleBar(
          { stream: process.stderr, format: 'importing |{bar}| {value}/{total} records', hideCursor: true },
          Presets.shades_classic,
        )
      : undefined;
    let result: ImportResult;
    try {
      bar?.start(await countRecords(file, format), 0);
      // The batches in flight each need a connection, besides the one holding the import's staging table.
      result = await withDatabase(
        async (db, _applied, database) =>
          importCustomers(database, (await findShop(db, opts.shop)).id, readImportFile(file, format), {
            batchSize: opts.batchSize,
            onProgress: (read) => bar?.update(read),
          }),
        PARALLEL_BATCHES + 1,
      );
    } finally {
      bar?.stop();
    }
    printImportResult(file, result);
    if (result.rejectedCount || result.referralErrorCount) process.exitCode = EXIT_LINES_REJECTED;
  })
  .addHelpText(
    'after',
    `\nExit code: 0 when every line was imported, ${EXIT_LINES_REJECTED} when the import finished but refused some lines ` +
      `(a rejected line, or a referredBy refused; the first ${DEFAULT_REPORT_LIMIT} of each are listed, all are counted), ` +
      '1 when it failed (nothing of a bad file is imported).',
  );

program
  .command('orders')
  .description('orders')
  .command('import')
  .description(
    'record orders of the past from NDJSON (one order per line: a PUT /orders body plus its orderId, or a Shopify Order as its ' +
      'webhooks and Admin API give it, whose missing customers are created from the order as the Shopify connector does) or CSV (header row; ' +
      `columns ${ORDER_COLUMNS.all.join(', ')}; lineItems as a JSON list): the shop's rules earn their points as for new orders; ` +
      'bad lines are reported and skipped, and a re-run changes nothing',
  )
  .argument('<file>', 'a .ndjson/.jsonl or .csv file (other names: detected from the content)')
  .requiredOption(...SHOP_OPTION)
  .action(async (file: string, opts: { shop: string }) => {
    await access(file, constants.R_OK).catch((err: Error) => {
      throw new ImportFileError(`cannot read ${file}: ${err.message}`);
    });
    const format = await detectFormat(file);
    const bar = process.stderr.isTTY
      ? new SingleBar({ stream: process.stderr, format: 'importing |{bar}| {value}/{total} orders', hideCursor: true }, Presets.shades_classic)
      : undefined;
    let result: OrdersImportResult;
    try {
      bar?.start(await countRecords(file, format), 0);
      result = await withDatabase(
        async (db) =>
          importOrders(db, (await findShop(db, opts.shop)).id, readImportFile(file, format, ORDER_COLUMNS, parseShopifyJson), {
            onProgress: (read) => bar?.update(read),
          }),
        ORDER_IMPORT_POOL_SIZE,
      );
    } finally {
      bar?.stop();
    }
    const { imported, created, updated, unchanged, rejected, rejectedCount } = result;
    const lines = [`Imported ${imported} order line(s) from ${file}: ${created} order(s) created, ${updated} updated, ${unchanged} unchanged.`];
    lines.push(...listProblems(`Rejected ${rejectedCount} line(s)`, rejected, rejectedCount));
    print(lines.join('\n'), result);
    if (rejectedCount) process.exitCode = EXIT_LINES_REJECTED;
  })
  .addHelpText('after', `\nExit code: 0 when every line was imported, ${EXIT_LINES_REJECTED} when some were refused (the first ${DEFAULT_REPORT_LIMIT} are listed, all are counted), 1 when it failed.`);

/** --tier-until: a day (midnight UTC) or an instant in ISO 8601, in the future. */
function untilDate(value: string): Date {
  const at = isoDateOption(value);
  if (at.getTime() <= Date.now()) throw new InvalidArgumentError('must be in the future: the placed tiers hold until then');
  return at;
}

/** Placed tiers hold a year unless --tier-until says otherwise: about what a peer's tier period gives. */
const DEFAULT_TIER_MONTHS = 12;

const peerImport = program
  .command('import')
  .description("customers from another loyalty program's customer export (CSV), by e-mail: balances, birthdays and tiers (docs/operations.md)");

for (const source of Object.keys(PEER_SOURCES) as PeerSource[]) {
  const { label } = PEER_SOURCES[source];
  peerImport
    .command(source)
    .description(
      `match (by e-mail) or create the customers of ${label}'s customers export and set each balance once, with one ledger entry ` +
        `"Imported from ${label}"; set birthdays; place tiers by name (the shop's own tiers; an unknown name is reported). ` +
        'Bad lines are reported and skipped; a re-run changes nothing.',
    )
    .argument('<file>', `the CSV file ${label} exported`)
    .requiredOption(...SHOP_OPTION)
    .option('--dry-run', 'say what the import would change, and change nothing')
    .option('--tier-until <date>', `until when placed tiers hold, as overrides (default: ${DEFAULT_TIER_MONTHS} months from now); the tier earned here decides after`, untilDate)
    .option('--batch-size <rows>', 'rows per transaction', batchSize, 1000)
    .action(async (file: string, opts: { shop: string; dryRun?: boolean; tierUntil?: Date; batchSize: number }) => {
      await access(file, constants.R_OK).catch((err: Error) => {
        throw new ImportFileError(`cannot read ${file}: ${err.message}`);
      });
      const tierUntil = opts.tierUntil ?? new Date(new Date().setUTCMonth(new Date().getUTCMonth() + DEFAULT_TIER_MONTHS));
      const bar = process.stderr.isTTY
        ? new SingleBar({ stream: process.stderr, format: 'importing |{bar}| {value}/{total} customers', hideCursor: true }, Presets.shades_classic)
        : undefined;
      let result: PeerImportResult;
      try {
        bar?.start(await countRecords(file, 'csv'), 0);
        result = await withDatabase(
          async (db, _applied, database) =>
            importPeerCustomers(database, (await findShop(db, opts.shop)).id, source, readImportFile(file, 'csv', PEER_COLUMNS[source]), {
              batchSize: opts.batchSize,
              dryRun: opts.dryRun === true,
              tierUntil,
              onProgress: (read) => bar?.update(read),
            }),
          PARALLEL_BATCHES + 1,
        );
      } finally {
        bar?.stop();
      }
      const { imported, created, updated, unchanged, balancesSet, tiersPlaced, rejected, rejectedCount, tierProblems, tierProblemCount } = result;
      const lines = [
        `${opts.dryRun ? 'Dry run, nothing written: would import' : 'Imported'} ${imported} customer(s) from ${label} (${file}): ` +
          `${created} created, ${updated} updated, ${unchanged} unchanged; ${balancesSet} balance(s) set, ${tiersPlaced} tier(s) placed until ${tierUntil.toISOString()}.`,
      ];
      lines.push(...listProblems(`Rejected ${rejectedCount} line(s)`, rejected, rejectedCount));
      lines.push(...listProblems(`Tier not placed on ${tierProblemCount} line(s)`, tierProblems, tierProblemCount));
      print(lines.join('\n'), { source, ...result, tierUntil });
      if (rejectedCount || tierProblemCount) process.exitCode = EXIT_LINES_REJECTED;
    })
    .addHelpText(
      'after',
      `\nExit code: 0 when every line was imported whole, ${EXIT_LINES_REJECTED} when the import finished but refused some lines or some tiers ` +
        `(the first ${DEFAULT_REPORT_LIMIT} of each are listed, all are counted), 1 when it failed.`,
    );
}

/** --since: a day (midnight UTC) or an instant, in ISO 8601. */
function sinceDate(value: string): Date {
  const at = isoDateOption(value);
  if (at.getTime() > Date.now()) throw new InvalidArgumentError('must not be in the future');
  return at;
}

/** A day (midnight UTC) or an instant, in ISO 8601. */
function isoDateOption(value: string): Date {
  const text = value.trim();
  const day = /^\d{4}-\d{2}-\d{2}$/.test(text);
  const at = day ? new Date(`${text}T00:00:00Z`) : /^\d{4}-\d{2}-\d{2}T/.test(text) ? new Date(text) : new Date(NaN);
  // A day the calendar does not have (2026-02-30) would otherwise roll over into the next month.
  if (Number.isNaN(at.getTime()) || (day && at.toISOString().slice(0, 10) !== text)) throw new InvalidArgumentError('expected a date such as 2026-01-01, or an instant such as 2026-01-01T09:00:00Z');
  return at;
}

program
  .command('shopify')
  .description('the shop\'s Shopify store, connected to its Admin API')
  .command('import')
  .description(
    'bring the customers and orders created in the Shopify store since --since, by Shopify\'s bulk operations: orders earn by the ' +
      'shop\'s rules as the connector\'s webhooks do, and an order imported and also delivered by a webhook is one order that earns once. ' +
      'A run stopped anywhere (even killed) is resumed by running the same command again; a finished import run again changes nothing.',
  )
  .requiredOption(...SHOP_OPTION)
  .requiredOption('--since <date>', 'what was created from this day (UTC) or instant on, e.g. 2026-01-01', sinceDate)
  .option('--batch-size <objects>', 'customers or orders per transaction', batchSize, DEFAULT_IMPORT_BATCH)
  .action(async (opts: { shop: string; since: Date; batchSize: number }) => {
    const config = loadConfig();
    const secrets = createSecretBox(loadSecretsKey({ secretsKey: config.secretsKey, dataDir: config.dataDir }).key);
    const bar = process.stderr.isTTY
      ? new SingleBar({ stream: process.stderr, format: '{phase} |{bar}| {value}/{total} lines', hideCursor: true }, Presets.shades_classic)
      : undefined;
    let shown: string | undefined;
    let result: HistoryImportResult;
    try {
      result = await withDatabase(async (db) =>
        importShopifyHistory({
          db,
          secrets,
          urls: { baseUrlTemplate: config.shopifyAdminBaseUrl },
          shopId: (await findShop(db, opts.shop)).id,
          since: opts.since,
          batchSize: opts.batchSize,
          onProgress: (phase, applied, total) => {
            if (shown !== phase) {
              bar?.stop();
              bar?.start(total, applied, { phase });
              shown = phase;
            } else bar?.update(applied);
          },
        }),
      );
    } finally {
      bar?.stop();
    }
    const { state, resumed, customers, orders, skipped, skippedCount } = result;
    const lines = [
      `${resumed ? 'Resumed and finished' : 'Finished'} the import of what was created since ${state.since.toISOString()}: ` +
        `${state.customersApplied} customer(s) and ${state.ordersApplied} order(s) applied in all (${customers} and ${orders} by this run).`,
    ];
    if (skippedCount) {
      lines.push(`Left out ${skippedCount} object(s)${skippedCount > skipped.length ? `; the first ${skipped.length}` : ''}:`, ...skipped.map((s) => `  ${s.id}: ${s.reason}`));
    }
    print(lines.join('\n'), { ...state, resumed, run: { customers, orders, skipped, skippedCount } });
  });

function printImportResult(file: string, result: ImportResult): void {
  const { imported, created, updated, unchanged, balancesSet, rejected, rejectedCount, referralsLinked, referralErrors, referralErrorCount } =
    result;
  const lines = [
    `Imported ${imported} customer(s) from ${file}: ${created} created, ${updated} updated, ${unchanged} unchanged; ${balancesSet} balance(s) set.`,
  ];
  lines.push(...listProblems(`Rejected ${rejectedCount} line(s)`, rejected, rejectedCount));
  if (referralsLinked) lines.push(`Linked ${referralsLinked} referee(s) to their referrer (referredBy).`);
  lines.push(...listProblems(`Referrer refused on ${referralErrorCount} line(s)`, referralErrors, referralErrorCount));
  print(lines.join('\n'), {
    imported,
    created,
    updated,
    unchanged,
    balancesSet,
    rejected,
    rejectedCount,
    referralsLinked,
    referralErrors,
    referralErrorCount,
  });
}

/** A heading and the listed problems, saying how many more were only counted. */
function listProblems(heading: string, listed: ImportRejection[], count: number): string[] {
  if (count === 0) return [];
  const more = count - listed.length;
  return [
    more ? `${heading}; the first ${listed.length}:` : `${heading}:`,
    ...listed.map((r) => `  line ${r.line}: ${r.error}`),
    ...(more ? [`  … and ${more} more`] : []),
  ];
}

/** The one-line reason an error stopped the command, and its code for --json. */
function describeError(err: unknown): { code: string; message: string } {
  if (err instanceof ConfigError) return { code: 'invalid_configuration', message: err.message };
  if (err instanceof DataDirLockedError) return { code: 'data_dir_locked', message: err.message };
  if (err instanceof DomainError || err instanceof ImportFileError) return { code: err.code, message: err.message };
  // pg reports a refused connection to several addresses as an AggregateError without a message.
  const inner = err instanceof AggregateError && !err.message ? err.errors[0] : err;
  return { code: 'internal_error', message: inner instanceof Error ? inner.message : String(inner) };
}

program.parseAsync().catch((err: unknown) => {
  const { code, message } = describeError(err);
  if (json()) process.stdout.write(`${JSON.stringify({ error: code, message })}\n`);
  else process.stderr.write(`error: ${message}\n`);
  process.exitCode = 1;
});
