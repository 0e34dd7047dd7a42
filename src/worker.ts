// `npm run worker`: the outbox relay and the webhook delivery worker, without HTTP. Run any number
// of these beside servers started with WORKER=off (all on one PostgreSQL database); work is shared
// through FOR UPDATE SKIP LOCKED claims.
import { buildApp } from './app.js';
import { ConfigError, loadConfig } from './config.js';
import { DataDirLockedError } from './db/data-dir-lock.js';
import { stopOnSignals } from './shutdown.js';

async function main() {
  const config = loadConfig();
  const app = await buildApp(config);
  if (app.database.kind === 'pglite') {
    app.logger.warn('no DATABASE_URL: this worker has the embedded database to itself; servers cannot share it');
  }
  app.startWorker();
  app.logger.info({ database: app.database.kind }, 'webhook worker running');
  stopOnSignals(app);
}

main().catch((err) => {
  process.stderr.write(
    err instanceof ConfigError || err instanceof DataDirLockedError ? `${err.message}\n` : `worker failed to start: ${err instanceof Error ? err.stack : String(err)}\n`,
  );
  process.exit(1);
});
