import type { DestinationStream } from "pino";
import { ConfigError } from "./config.ts";
import { createLogger, type Logger } from "./logger.ts";

/** The exit code of a process stopped by its configuration (sysexits' EX_CONFIG). */
export const EXIT_CONFIG = 78;

/**
 * Ordered shutdown for one process: what was opened last is closed first (workers before the
 * queues they use, queues before Redis, everything before Postgres).
 */
export interface ShutdownManager {
  register: (name: string, step: () => unknown) => void;
  /** Runs every step once; a second call (a second signal) gets the first call's promise. */
  run: (reason: string) => Promise<void>;
}

export const createShutdownManager = (logger: Logger, service: string): ShutdownManager => {
  const steps: { name: string; run: () => unknown }[] = [];
  let running: Promise<void> | null = null;
  return {
    register(name, step) {
      steps.push({ name, run: step });
    },
    run(reason) {
      running ??= (async () => {
        logger.info({ reason }, `${service} shutting down`);
        for (const step of [...steps].reverse()) {
          // A failing step must not keep the next ones (closing Postgres last) from running.
          try {
            await step.run();
          } catch (err) {
            logger.warn({ step: step.name, err }, "shutdown step failed");
          }
        }
        logger.info(`${service} stopped`);
      })();
      return running;
    },
  };
};

/** The part of `process` a service's main touches; tests pass their own. */
export interface ProcessPort {
  env: Record<string, string | undefined>;
  on: (signal: "SIGTERM" | "SIGINT", listener: () => void) => unknown;
  exit: (code: number) => void;
  stderr: { write: (text: string) => unknown };
  /** Present when a parent spawned the process with an IPC channel (tests, supervisors). */
  send?: ((message: unknown) => unknown) | undefined;
}

export interface ServiceContext<C> {
  config: C;
  logger: Logger;
  shutdown: ShutdownManager;
}

export interface ServiceDefinition<C extends { LOG_LEVEL: string }> {
  /** The logger's name and the words of the start and stop lines: "api", "worker". */
  name: string;
  /** Parses the environment once; a ConfigError stops the process with code 78, naming the variable. */
  loadConfig: (env: Record<string, string | undefined>) => C;
  /** Fields every line of this process carries (the worker's id). */
  logBindings?: (config: C) => Record<string, unknown>;
  /**
   * Opens the process's clients and starts serving. Each resource registers its closing step as it
   * is opened, so a start that fails half-way still closes what it opened.
   */
  start: (ctx: ServiceContext<C>) => Promise<void>;
  /** Where the logger writes (stdout by default); for tests. */
  logDestination?: DestinationStream;
}

/**
 * The one main of a long-running process (api, worker): config, logger, signals, exit codes.
 * SIGTERM or SIGINT runs the shutdown once (a second signal is ignored) and exits 0; a signal
 * that comes during the start waits for it, so what the start opens is closed too. When the start
 * is done, a parent that spawned the process with an IPC channel is sent "ready" (as pm2's
 * wait_ready expects): a state to wait for, instead of a log line to look for.
 */
export const runService = async <C extends { LOG_LEVEL: string }>(
  def: ServiceDefinition<C>,
  proc: ProcessPort = process,
): Promise<void> => {
  let config: C;
  try {
    config = def.loadConfig(proc.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      proc.stderr.write(`${err.message}\n`);
      proc.exit(EXIT_CONFIG);
      return;
    }
    proc.stderr.write(`${def.name} failed to start: ${err instanceof Error ? (err.stack ?? err.message) : err}\n`);
    proc.exit(1);
    return;
  }
  const base = createLogger(def.name, config.LOG_LEVEL, def.logDestination);
  const logger = def.logBindings ? base.child(def.logBindings(config)) : base;
  const shutdown = createShutdownManager(logger, def.name);

  let exited = false;
  const exit = (code: number) => {
    if (exited) return;
    exited = true;
    proc.exit(code);
  };
  let starting: Promise<void> = Promise.resolve();
  let signalled = false;
  const onSignal = (signal: "SIGTERM" | "SIGINT") => {
    if (signalled) return;
    signalled = true;
    void (async () => {
      await starting.catch(() => undefined);
      await shutdown.run(signal);
      exit(0);
    })();
  };
  proc.on("SIGTERM", () => onSignal("SIGTERM"));
  proc.on("SIGINT", () => onSignal("SIGINT"));

  starting = def.start({ config, logger, shutdown });
  try {
    await starting;
  } catch (err) {
    if (err instanceof ConfigError) proc.stderr.write(`${err.message}\n`);
    else logger.fatal({ err }, `${def.name} failed to start`);
    await shutdown.run("start failed");
    exit(err instanceof ConfigError ? EXIT_CONFIG : 1);
    return;
  }
  if (!signalled) proc.send?.("ready");
};
