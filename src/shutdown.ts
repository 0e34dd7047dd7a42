import type { App } from './app.js';

/**
 * Under `npm start` a Ctrl-C reaches this process twice within milliseconds: from the terminal
 * (npm and we share its process group) and forwarded by npm. Repeats this soon are one signal.
 */
const SAME_SIGNAL_MS = 1_000;

/**
 * Stops `app` cleanly on SIGTERM or SIGINT (in-flight requests finish, the delivery worker hands
 * its leases back) and exits; a second signal, a second or more later, exits at once.
 */
export function stopOnSignals(app: App): void {
  let firstAt: number | undefined;
  const shutdown = (signal: string) => {
    if (firstAt !== undefined) {
      if (Date.now() - firstAt >= SAME_SIGNAL_MS) process.exit(1); // asked again: stop waiting
      return;
    }
    firstAt = Date.now();
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
