import pino, { type Logger } from 'pino';

export type { Logger };

/** JSON logs on stdout. Credentials are censored wherever they might be logged. */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      redact: {
        paths: [
          'req.headers.authorization',
          'headers.authorization',
          '*.apiKey',
          'apiKey',
          '*.signingSecret',
          'signingSecret',
          'connectionParams.Authorization',
          // A staff session's cookie and CSRF token, and passwords of the staff doors' bodies.
          'req.headers.cookie',
          'headers.cookie',
          'req.headers["x-csrf-token"]',
          'headers["x-csrf-token"]',
          '*.password',
          'password',
          '*.currentPassword',
          '*.newPassword',
        ],
        censor: '[redacted]',
      },
    },
    destination,
  );
}
