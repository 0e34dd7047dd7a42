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
        ],
        censor: '[redacted]',
      },
    },
    destination,
  );
}
