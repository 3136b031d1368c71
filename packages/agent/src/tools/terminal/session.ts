import { readFileSync } from "node:fs";
import { SANDBOX_STATE_DIR, type SandboxDriver, type SandboxRef } from "@tern/sandbox";

/**
 * Where the terminal keeps its state in the sandbox: the tmpfs the driver mounts outside the
 * workspace's disk limit (an older sandbox without it keeps the same files on its disk).
 */
const terminalStateDir = SANDBOX_STATE_DIR;
/** A claim is also marked on the sandbox's disk (when it takes it): a restart wipes the tmpfs. */
const diskClaimsDir = "/tmp/tern-tools/terminal";

const controllerScript = readFileSync(new URL("./controller.sh", import.meta.url), "utf8");

type TerminalMode = "run" | "input" | "poll" | "reset" | "interrupt";

/** How a call ended, as the controller reports it. */
type TerminalStatus =
  /** The command ended (its prompt is back). */
  | "completed"
  /** Nothing new printed for the no-change timeout; the command runs on. */
  | "no_change"
  /** The call's own `timeout` passed; the command runs on. */
  | "hard_timeout"
  /** A new command while one runs: not sent. */
  | "refused"
  /** Input or a poll with no command running. */
  | "idle"
  /** The shell itself ended (`exit`, `exec`). */
  | "exited"
  | "reset"
  /** Claimed earlier, and its result is gone (the sandbox restarted): not run again. */
  | "lost"
  /** An attach that was asked to wait only so long, and the result is not there yet. */
  | "pending"
  /** `interrupt`: Ctrl-C went to the shell (if a command ran). */
  | "sent"
  /** The sandbox has no tmux (its image predates the live terminal): nothing was claimed or sent. */
  | "notmux"
  | "error";

export interface TerminalCall {
  sandbox: Pick<SandboxDriver, "exec">;
  sandboxRef: SandboxRef;
  /** The ActionEvent id: the call's claim; absent for `interrupt`. */
  actionId?: string;
  mode: TerminalMode;
  text?: string;
  /** A tmux key name (specialKey) to send instead of text. */
  key?: string | null;
  /** 0: none (the no-change timeout applies). */
  hardTimeoutMs: number;
  noChangeTimeoutMs: number;
  /** New output beyond this is cut in the middle, the whole saved in the sandbox. */
  maxOutputBytes: number;
  /** Where a new shell starts. */
  cwd: string;
  /** The shell's environment when this call starts it (the user's secrets). */
  env?: Record<string, string>;
  /** A call already claimed waits this long for its result, then reports `pending` (0: as long as it takes). */
  attachMs?: number;
  /** Stops waiting (the controller goes on in the sandbox and keeps the result for a later call). */
  signal?: AbortSignal;
}

export interface TerminalResult {
  status: TerminalStatus;
  exitCode: number;
  /** Bytes of new output left out of `output`. */
  cutBytes: number;
  /** The call had to start a shell while one had been there before (it ended). */
  newShell: boolean;
  workingDir: string | null;
  pythonInterpreter: string | null;
  /** The file in the sandbox holding the whole new output, when it was cut. */
  fullOutputPath: string | null;
  output: string;
}

class TerminalError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TerminalError";
  }
}

const statuses: ReadonlySet<string> = new Set<TerminalStatus>([
  "completed",
  "no_change",
  "hard_timeout",
  "refused",
  "idle",
  "exited",
  "reset",
  "lost",
  "pending",
  "sent",
  "notmux",
  "error",
]);

/** The controller's answer: a header line, three lines of facts, then the new output. */
const parseControllerOutput = (stdout: string): TerminalResult | null => {
  const lines = stdout.split("\n");
  const m = /^TERN_TERM (\w+) (-?\d+) (\d+) ([01])$/.exec(lines[0] ?? "");
  if (!m || !statuses.has(m[1] as string) || lines.length < 4) return null;
  const output = lines.slice(4).join("\n");
  const cutBytes = Number(m[3]);
  return {
    status: m[1] as TerminalStatus,
    exitCode: Number(m[2]),
    cutBytes,
    newShell: m[4] === "1",
    workingDir: lines[1] || null,
    pythonInterpreter: lines[2] || null,
    fullOutputPath: lines[3] || null,
    output:
      cutBytes > 0
        ? output.replace("\nTERN_CUT_MARK\n", `\n[... output cut: ${cutBytes} bytes in the middle left out ...]\n`)
        : output,
  };
};

/** One call of the conversation's terminal: one exec of the controller in the sandbox. */
export const callTerminal = async (call: TerminalCall): Promise<TerminalResult> => {
  const res = await call.sandbox.exec(call.sandboxRef, {
    cmd: ["bash", "-c", controllerScript],
    env: {
      ...call.env,
      TERN_D: terminalStateDir,
      TERN_MODE: call.mode,
      TERN_ACTION: call.actionId ?? "",
      TERN_TEXT: call.text ?? "",
      TERN_KEY: call.key ?? "",
      TERN_ENTER: "1",
      TERN_HARD_MS: String(Math.max(0, Math.round(call.hardTimeoutMs))),
      TERN_NOCHANGE_MS: String(Math.max(1, Math.round(call.noChangeTimeoutMs))),
      TERN_MAX: String(call.maxOutputBytes),
      TERN_CWD: call.cwd,
      TERN_ATTACH_MS: String(call.attachMs ?? 0),
      TERN_DISK_CLAIMS: diskClaimsDir,
    },
    maxOutputBytes: call.maxOutputBytes * 2 + 64 * 1024,
    ...(call.signal ? { signal: call.signal } : {}),
  });
  const result = parseControllerOutput(res.stdout);
  if (!result) {
    throw new TerminalError(
      `the sandbox did not run the terminal (exit ${res.exitCode}): ${(res.stderr || res.stdout).slice(0, 500)}`,
    );
  }
  return result;
};
