import type { Logger } from "pino";
import { pino } from "pino";

export type { Logger };

export const createLogger = (name: string, level = "info"): Logger =>
  pino({ name, level, base: { service: name }, timestamp: pino.stdTimeFunctions.isoTime });
