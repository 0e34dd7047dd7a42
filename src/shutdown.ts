import type { App } from './app.js';

/**
 * Stops `app` cleanly on SIGTERM or SIGINT (in-flight requests finish, the delivery worker hands
 * its leases back) and exits; a second signal exits at once.
 */
export function stopOnSignals(app: App): void {
  let signals = 0;
  const shutdown = (signal: string) => {
    if (signals++ > 0) process.exit(1); // a second signal: stop waiting
    app.logger.info({ signal }, 'shutting down');
    app.stop().then(
      () => process.exit(0),
      (err) => {
        app.logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}
