import type { AddressInfo } from 'node:net';
import type { Config } from './config.js';
import { type DatabaseHandle, openDatabase } from './db/database.js';
import { migrateToLatest } from './db/migrate.js';
import { purgeExpiredIdempotencyKeys } from './domain/idempotency.js';
import { createHttpServer } from './http/server.js';
import { createLogger, type Logger } from './logger.js';

export type App = {
  database: DatabaseHandle;
  logger: Logger;
  /** Listens on the configured host and port; resolves to the base URL. */
  start(): Promise<string>;
  /** Stops accepting, finishes in-flight requests, closes the database. Safe to call twice. */
  stop(): Promise<void>;
};

export type AppOptions = { logger?: Logger };

const HOUR = 60 * 60 * 1000;

export async function buildApp(config: Config, options: AppOptions = {}): Promise<App> {
  const logger = options.logger ?? createLogger(config.logLevel);
  const database = await openDatabase({
    url: config.databaseUrl,
    dataDir: config.databaseUrl ? undefined : config.dataDir,
    poolSize: config.databasePoolSize,
  });
  let http: Awaited<ReturnType<typeof createHttpServer>>;
  try {
    const applied = await migrateToLatest(database.db);
    if (applied.length) logger.info({ migrations: applied }, 'database migrated');
    http = await createHttpServer({ db: database.db, logger });
  } catch (err) {
    await database.close();
    throw err;
  }

  const purge = setInterval(() => {
    purgeExpiredIdempotencyKeys(database.db).catch((err) => logger.warn({ err }, 'idempotency purge failed'));
  }, HOUR);
  purge.unref();

  let stopping: Promise<void> | undefined;
  return {
    database,
    logger,
    async start() {
      await http.listen({ port: config.port, host: config.host });
      const { port } = http.server.address() as AddressInfo;
      const host = config.host.includes(':') ? `[${config.host}]` : config.host;
      return `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`;
    },
    stop() {
      stopping ??= (async () => {
        clearInterval(purge);
        await http.close();
        await database.close();
      })();
      return stopping;
    },
  };
}
