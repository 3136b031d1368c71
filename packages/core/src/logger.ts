import type { DestinationStream, Logger } from "pino";
import { pino } from "pino";

export type { Logger };

/**
 * The logger of one process. Errors go under `err` (`logger.warn({ err }, "…")`): the standard
 * serializer keeps their type, message, stack and cause, where `err.message` alone loses the
 * stack. `destination` is for tests that read what was logged.
 */
export const createLogger = (name: string, level = "info", destination?: DestinationStream): Logger =>
  pino(
    {
      name,
      level,
      base: { service: name },
      timestamp: pino.stdTimeFunctions.isoTime,
      serializers: { err: pino.stdSerializers.err },
    },
    destination,
  );
