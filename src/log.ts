// JSON logs. Node names and other per-object detail are logged at debug only, so info-level
// logs carry no inventory of the cluster.
import pino, { type Logger } from 'pino';

export function createLogger(level = 'info', destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { app: 'veneer-node-watcher' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: ['key', 'tls.key', '*.key', 'token', '*.token', 'authorization'], censor: '[redacted]' },
    },
    destination,
  );
}

export type { Logger };
