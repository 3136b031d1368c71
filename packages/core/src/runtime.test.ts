import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { configFields, parseConfig } from "./config.ts";
import { createLogger } from "./logger.ts";
import { createShutdownManager, EXIT_CONFIG, type ProcessPort, runService } from "./runtime.ts";

/** What a logger wrote, one parsed line each. */
const logSink = () => {
  const lines: Record<string, unknown>[] = [];
  return { lines, destination: { write: (line: string) => void lines.push(JSON.parse(line)) } };
};

/** A process of the test's own: signals are emitted by hand, exit and IPC are recorded. */
const fakeProcess = (env: Record<string, string> = {}) => {
  const signals = new EventEmitter();
  const exits: number[] = [];
  const sent: unknown[] = [];
  let stderr = "";
  let exited: (code: number) => void = () => undefined;
  const exit = new Promise<number>((resolve) => {
    exited = resolve;
  });
  const port: ProcessPort = {
    env,
    on: (signal, listener) => signals.on(signal, listener),
    exit: (code) => {
      exits.push(code);
      exited(code);
    },
    stderr: { write: (text) => (stderr += text) },
    send: (message) => sent.push(message),
  };
  return { port, signals, exits, sent, exit, stderr: () => stderr };
};

const config = z.object({ LOG_LEVEL: configFields.LOG_LEVEL, PORT: configFields.PORT });
const loadConfig = (env: Record<string, string | undefined>) => parseConfig(config, env);

/** A promise and the function that settles it, to hold a start in flight. */
const gate = () => {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { open, opened };
};

describe("the shutdown manager", () => {
  it("runs the steps once each, the last registered first, however often it is asked", async () => {
    const { lines, destination } = logSink();
    const shutdown = createShutdownManager(createLogger("test", "info", destination), "test");
    const ran: string[] = [];
    for (const name of ["postgres", "redis", "queues", "workers"]) shutdown.register(name, () => ran.push(name));
    await Promise.all([shutdown.run("SIGTERM"), shutdown.run("SIGINT")]);
    await shutdown.run("again");
    expect(ran).toEqual(["workers", "queues", "redis", "postgres"]);
    expect(lines.map((l) => l.msg)).toEqual(["test shutting down", "test stopped"]);
    expect(lines[0]?.reason).toBe("SIGTERM");
  });

  it("logs a failing step with its error's stack, and still runs the next one", async () => {
    const { lines, destination } = logSink();
    const shutdown = createShutdownManager(createLogger("test", "info", destination), "test");
    const ran: string[] = [];
    shutdown.register("postgres", async () => void ran.push("postgres"));
    shutdown.register("redis", async () => {
      throw new Error("connection reset");
    });
    await shutdown.run("SIGTERM");
    expect(ran).toEqual(["postgres"]);
    const failed = lines.find((l) => l.msg === "shutdown step failed");
    expect(failed?.step).toBe("redis");
    expect(failed?.err).toMatchObject({ type: "Error", message: "connection reset" });
    expect((failed?.err as { stack?: string } | undefined)?.stack).toMatch(/runtime\.test\.ts/);
    expect(lines.at(-1)?.msg).toBe("test stopped");
  });
});

describe("runService", () => {
  it("exits 78 on a configuration error, naming the variable, before anything starts", async () => {
    const p = fakeProcess({ PORT: "eighty" });
    let started = false;
    await runService(
      {
        name: "api",
        loadConfig,
        start: async () => {
          started = true;
        },
      },
      p.port,
    );
    expect(p.exits).toEqual([EXIT_CONFIG]);
    expect(p.stderr()).toMatch(/^Invalid configuration: PORT: /);
    expect(started).toBe(false);
  });

  it("handles SIGTERM once: one shutdown, one exit with code 0, whatever signals follow", async () => {
    const p = fakeProcess();
    const { lines, destination } = logSink();
    const ran: string[] = [];
    await runService(
      {
        name: "worker",
        loadConfig,
        logDestination: destination,
        logBindings: () => ({ worker_id: "w1" }),
        start: async ({ shutdown }) => {
          shutdown.register("postgres", () => ran.push("postgres"));
          shutdown.register("workers", () => ran.push("workers"));
        },
      },
      p.port,
    );
    expect(p.sent).toEqual(["ready"]);
    p.signals.emit("SIGTERM");
    p.signals.emit("SIGTERM");
    p.signals.emit("SIGINT");
    expect(await p.exit).toBe(0);
    expect(ran).toEqual(["workers", "postgres"]);
    expect(p.exits).toEqual([0]);
    expect(lines.filter((l) => l.msg === "worker stopped")).toHaveLength(1);
    expect(lines.find((l) => l.msg === "worker shutting down")).toMatchObject({ reason: "SIGTERM", worker_id: "w1" });
  });

  it("logs a failed start with the error's stack, closes what it opened, and exits 1", async () => {
    const p = fakeProcess();
    const { lines, destination } = logSink();
    const ran: string[] = [];
    await runService(
      {
        name: "api",
        loadConfig,
        logDestination: destination,
        start: async ({ shutdown }) => {
          shutdown.register("postgres", () => ran.push("postgres"));
          throw new Error("redis unreachable");
        },
      },
      p.port,
    );
    expect(p.exits).toEqual([1]);
    expect(ran).toEqual(["postgres"]);
    const fatal = lines.find((l) => l.msg === "api failed to start");
    expect(fatal?.err).toMatchObject({ message: "redis unreachable" });
    expect((fatal?.err as { stack?: string } | undefined)?.stack).toMatch(/runtime\.test\.ts/);
    expect(p.sent).toEqual([]);
  });

  it("exits 78 on a configuration error found during the start (after closing what it opened)", async () => {
    const p = fakeProcess();
    const ran: string[] = [];
    await runService(
      {
        name: "worker",
        loadConfig,
        logDestination: logSink().destination,
        start: async ({ shutdown }) => {
          shutdown.register("postgres", () => ran.push("postgres"));
          parseConfig(z.object({ DOCKER_HOST: z.url() }), { DOCKER_HOST: "nonsense" });
        },
      },
      p.port,
    );
    expect(p.exits).toEqual([EXIT_CONFIG]);
    expect(p.stderr()).toMatch(/DOCKER_HOST/);
    expect(ran).toEqual(["postgres"]);
  });

  it("lets a start that a signal interrupts finish, then closes all it opened, and never says ready", async () => {
    const p = fakeProcess();
    const held = gate();
    const reached = gate();
    const ran: string[] = [];
    const running = runService(
      {
        name: "worker",
        loadConfig,
        logDestination: logSink().destination,
        start: async ({ shutdown }) => {
          shutdown.register("postgres", () => ran.push("postgres"));
          reached.open();
          await held.opened;
          shutdown.register("workers", () => ran.push("workers"));
        },
      },
      p.port,
    );
    await reached.opened;
    p.signals.emit("SIGTERM");
    expect(ran).toEqual([]);
    held.open();
    await running;
    expect(await p.exit).toBe(0);
    expect(ran).toEqual(["workers", "postgres"]);
    expect(p.sent).toEqual([]);
  });
});
