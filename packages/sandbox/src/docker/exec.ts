import { StringDecoder } from "node:string_decoder";
import type Docker from "dockerode";
import type { ExecOptions, ExecResult, SandboxProcess, SandboxProcessOptions } from "../driver.ts";
import { OutputBuffer } from "./output-buffer.ts";

const DEFAULT_MAX_OUTPUT = 1024 * 1024;
/** After `timeout` sent TERM, how long the process group has before KILL. */
const KILL_AFTER_SECONDS = 2;
/** If the stream is still open this long after the limit (a process escaped its group), give up on it. */
const WATCHDOG_GRACE_MS = KILL_AFTER_SECONDS * 1000 + 5_000;

/**
 * Splits Docker's multiplexed attach stream: frames of an 8-byte header (stream type, 3 zero
 * bytes, big-endian length) then the payload. Frames may arrive cut anywhere.
 */
const createDemuxer = (onFrame: (stream: "stdout" | "stderr", payload: Buffer) => void) => {
  let pending: Buffer = Buffer.alloc(0);
  return (chunk: Buffer): void => {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    while (pending.length >= 8) {
      const size = pending.readUInt32BE(4);
      if (pending.length < 8 + size) break;
      const type = pending[0];
      const payload = pending.subarray(8, 8 + size);
      pending = pending.subarray(8 + size);
      if (type === 1 || type === 2) onFrame(type === 2 ? "stderr" : "stdout", payload);
    }
  };
};

/**
 * The time limit is enforced inside the container by coreutils `timeout`, which runs the command
 * in a process group of its own and signals the whole group (TERM, then KILL): Docker has no way
 * to kill an exec from outside.
 */
const withTimeLimit = (cmd: string[], timeoutMs: number | undefined): string[] => {
  if (!timeoutMs || timeoutMs <= 0) return cmd;
  const seconds = Math.max(0.1, timeoutMs / 1000).toFixed(1);
  return ["timeout", "-s", "TERM", "-k", `${KILL_AFTER_SECONDS}s`, `${seconds}s`, ...cmd];
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const abortReason = (signal: AbortSignal): Error =>
  signal.reason instanceof Error ? signal.reason : new DOMException("the exec was aborted", "AbortError");

export const runExec = async (container: Docker.Container, opts: ExecOptions): Promise<ExecResult> => {
  opts.signal?.throwIfAborted();
  const started = Date.now();
  const maxOutput = opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;
  const hasStdin = opts.stdin !== undefined;
  const exec = await container.exec({
    Cmd: withTimeLimit(opts.cmd, opts.timeoutMs),
    AttachStdout: true,
    AttachStderr: true,
    AttachStdin: hasStdin,
    Tty: false,
    ...(opts.cwd ? { WorkingDir: opts.cwd } : {}),
    ...(opts.user ? { User: opts.user } : {}),
    ...(opts.env ? { Env: Object.entries(opts.env).map(([k, v]) => `${k}=${v}`) } : {}),
  });
  const stream = (await exec.start({ hijack: true, stdin: hasStdin })) as NodeJS.ReadWriteStream & {
    destroy: () => void;
  };

  const kept = { stdout: new OutputBuffer(maxOutput), stderr: new OutputBuffer(maxOutput) };
  const decoders = { stdout: new StringDecoder("utf8"), stderr: new StringDecoder("utf8") };
  const demux = createDemuxer((which, payload) => {
    kept[which].push(payload);
    if (opts.onOutput) {
      const text = decoders[which].write(payload);
      if (text) opts.onOutput(text, which);
    }
  });

  let abandoned = false;
  await new Promise<void>((resolve, reject) => {
    let watchdog: NodeJS.Timeout | undefined;
    let settled = false;
    const onAbort = () => {
      if (settled) return;
      abandoned = true;
      stream.destroy();
      finish(abortReason(opts.signal as AbortSignal));
    };
    const finish = (err?: Error) => {
      if (settled) return;
      settled = true;
      if (watchdog) clearTimeout(watchdog);
      opts.signal?.removeEventListener("abort", onAbort);
      if (err) reject(err);
      else resolve();
    };
    if (opts.signal?.aborted) return onAbort();
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    // While the sandbox is paused (frozen) its processes, `timeout` among them, make no progress:
    // the command is not late, it is waiting. The watchdog looks again rather than abandon it.
    const arm = (ms: number) => {
      watchdog = setTimeout(() => {
        container
          .inspect()
          .then((info) => info.State.Paused)
          .catch(() => false)
          .then((paused) => {
            if (settled) return;
            if (paused) return arm(WATCHDOG_GRACE_MS);
            abandoned = true;
            stream.destroy();
            finish();
          });
      }, ms);
    };
    if (opts.timeoutMs && opts.timeoutMs > 0) arm(opts.timeoutMs + WATCHDOG_GRACE_MS);
    stream.on("data", (c: Buffer) => demux(c));
    stream.on("end", () => finish());
    stream.on("close", () => finish());
    stream.on("error", (err: Error) => (abandoned ? finish() : finish(err)));
    const input = opts.stdin;
    if (typeof input === "string" || Buffer.isBuffer(input)) {
      stream.write(input);
      stream.end();
    } else if (input) {
      input.once("error", (err: Error) => {
        abandoned = true;
        stream.destroy();
        finish(err);
      });
      input.pipe(stream);
    }
  });

  // The stream can end a moment before Docker records the exit code.
  let exitCode: number | null = null;
  if (!abandoned) {
    for (let i = 0; i < 50; i++) {
      const info = await exec.inspect();
      if (!info.Running) {
        exitCode = info.ExitCode ?? null;
        break;
      }
      await sleep(Math.min(10 * (i + 1), 100));
    }
  }
  const durationMs = Date.now() - started;
  const hitLimit =
    !!opts.timeoutMs &&
    durationMs >= opts.timeoutMs - 50 &&
    (exitCode === 124 || exitCode === 137 || exitCode === null);
  if (opts.onOutput) {
    for (const which of ["stdout", "stderr"] as const) {
      const rest = decoders[which].end();
      if (rest) opts.onOutput(rest, which);
    }
  }
  return {
    exitCode,
    stdout: kept.stdout.toString(),
    stderr: kept.stderr.toString(),
    timedOut: abandoned || hitLimit,
    truncated: kept.stdout.truncated || kept.stderr.truncated,
    durationMs,
  };
};

/**
 * An exec kept open both ways: what is written goes to the process's stdin, its output comes back
 * demultiplexed as it arrives. Docker cannot kill an exec from outside: closing stdin or killing
 * the process from inside ends it; `detach` only drops the connection.
 */
export const openExecProcess = async (
  container: Docker.Container,
  opts: SandboxProcessOptions,
): Promise<SandboxProcess> => {
  const exec = await container.exec({
    Cmd: opts.cmd,
    AttachStdout: true,
    AttachStderr: true,
    AttachStdin: true,
    Tty: false,
    ...(opts.cwd ? { WorkingDir: opts.cwd } : {}),
    ...(opts.user ? { User: opts.user } : {}),
    ...(opts.env ? { Env: Object.entries(opts.env).map(([k, v]) => `${k}=${v}`) } : {}),
  });
  const stream = (await exec.start({ hijack: true, stdin: true })) as NodeJS.ReadWriteStream & {
    destroy: () => void;
  };
  const listeners = { stdout: [] as ((c: Buffer) => void)[], stderr: [] as ((c: Buffer) => void)[] };
  const demux = createDemuxer((which, payload) => {
    for (const l of listeners[which]) l(payload);
  });
  stream.on("data", (c: Buffer) => demux(c));
  const closed = new Promise<void>((resolve) => {
    stream.on("end", () => resolve());
    stream.on("close", () => resolve());
    stream.on("error", () => resolve());
  });
  return {
    write: (data) => {
      stream.write(data);
    },
    end: () => {
      stream.end();
    },
    onStdout: (l) => {
      listeners.stdout.push(l);
    },
    onStderr: (l) => {
      listeners.stderr.push(l);
    },
    pause: () => {
      stream.pause();
    },
    resume: () => {
      stream.resume();
    },
    closed,
    detach: () => stream.destroy(),
  };
};
