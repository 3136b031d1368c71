import { randomBytes } from "node:crypto";
import type { SandboxDriver, SandboxRef } from "@tern/sandbox";

/** Where tool executions leave their traces inside the sandbox, one directory per ActionEvent id. */
export const toolStateDir = "/tmp/tern-tools";

/**
 * Runs the program once per action, however many times it is asked. `mkdir` of the action's
 * directory is the atomic claim: the first caller runs the program and writes its output and exit
 * code there; a later caller (a worker resuming a run whose first worker died mid-command) finds
 * the directory, waits for the exit file of the first execution and reads the same result.
 * Docker keeps an exec running when the client that started it goes away, so the first execution
 * finishes even when its worker was killed.
 */
const wrapper = `
set -u
d="$TERN_STATE/run/$TERN_ACTION_ID"
mkdir -p "$TERN_STATE/run"
# Python is tern's own (the tools' directory, isolated from the image's PYTHON* settings) where the sandbox has it.
interpreter=$TERN_INTERPRETER
if [ "$interpreter" = python3 ] && [ -x /opt/tern/bin/python3 ]; then interpreter="/opt/tern/bin/python3 -I"; fi
if mkdir "$d" 2>/dev/null; then
  if [ "$TERN_INLINE" = 1 ]; then printf '%s' "$TERN_PROGRAM" > "$d/program"; else cp "$TERN_STATE/in/$TERN_ACTION_ID/program" "$d/program"; fi
  ( cd "$TERN_CWD" 2>/dev/null || cd /; exec timeout -s TERM -k 5 "$TERN_TIMEOUT" $interpreter "$d/program" ) > "$d/output" 2>&1 < /dev/null
  echo $? > "$d/exit.tmp" && mv "$d/exit.tmp" "$d/exit"
fi
n=0
limit=$(( (TERN_TIMEOUT + 15) * 10 ))
while [ ! -f "$d/exit" ]; do
  n=$((n + 1))
  if [ "$n" -gt "$limit" ]; then echo "TERN_NO_RESULT"; exit 0; fi
  sleep 0.1
done
size=$(stat -c %s "$d/output")
echo "TERN_RESULT $(cat "$d/exit") $size"
if [ "$size" -le "$TERN_MAX" ]; then
  cat "$d/output"
else
  head -c $((TERN_MAX / 2)) "$d/output"
  echo
  echo "$TERN_CUT"
  tail -c $((TERN_MAX / 2)) "$d/output"
fi
`;

/** What every tool call that runs in the sandbox is given: where, for which action, how much output. */
export interface SandboxCallContext {
  sandbox: Pick<SandboxDriver, "exec" | "upload">;
  /** The conversation's sandbox, as the driver knows it. */
  sandboxRef: SandboxRef;
  workspaceDir: string;
  /** The ActionEvent's id: the call's claim in the sandbox, and the key that makes a second execution read the first one's result. */
  actionId: string;
  /** Output kept per tool call; more is cut with a note. */
  maxOutputBytes: number;
  /** The user's secrets: environment of the agent's commands. */
  env?: Record<string, string>;
}

export interface RunOnceInput {
  sandbox: Pick<SandboxDriver, "exec" | "upload">;
  sandboxRef: SandboxRef;
  /** The ActionEvent id: unique per tool call, stable across workers. */
  actionId: string;
  interpreter: "bash" | "python3";
  program: string;
  cwd: string;
  timeoutSec: number;
  /** Output beyond this is cut in the middle, with a note saying how much. */
  maxOutputBytes: number;
  /** More environment of the program (the user's secrets); the wrapper's own TERN_ variables win. */
  env?: Record<string, string>;
}

export interface RunOnceResult {
  exitCode: number;
  output: string;
  timedOut: boolean;
  /** Bytes left out of `output`; 0 when it is whole. */
  cutBytes: number;
}

export class SandboxToolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SandboxToolError";
  }
}

/** Programs up to this size travel in the exec's environment (one Docker call); larger ones are uploaded first. */
const inlineProgramBytes = 64 * 1024;

export const runOnce = async (input: RunOnceInput): Promise<RunOnceResult> => {
  const inline = Buffer.byteLength(input.program) <= inlineProgramBytes && !input.program.includes("\0");
  if (!inline) {
    // Writing the program again on a resume is harmless: same action, same program.
    await input.sandbox.upload(input.sandboxRef, `${toolStateDir}/in/${input.actionId}`, [
      { path: "program", content: input.program, mode: 0o600 },
    ]);
  }
  const cut = `TERN_CUT_${randomBytes(8).toString("hex")}`;
  const res = await input.sandbox.exec(input.sandboxRef, {
    cmd: ["bash", "-c", wrapper],
    env: {
      ...input.env,
      TERN_STATE: toolStateDir,
      TERN_ACTION_ID: input.actionId,
      TERN_INTERPRETER: input.interpreter,
      TERN_CWD: input.cwd,
      TERN_TIMEOUT: String(input.timeoutSec),
      TERN_MAX: String(input.maxOutputBytes),
      TERN_CUT: cut,
      TERN_INLINE: inline ? "1" : "0",
      ...(inline ? { TERN_PROGRAM: input.program } : {}),
    },
    timeoutMs: (input.timeoutSec + 30) * 1000,
    maxOutputBytes: input.maxOutputBytes + 4096,
  });
  const out = res.stdout;
  const nl = out.indexOf("\n");
  const header = (nl < 0 ? out : out.slice(0, nl)).trim();
  const m = /^TERN_RESULT (\d+) (\d+)$/.exec(header);
  if (header === "TERN_NO_RESULT") {
    // The first execution started but never finished (its container restarted under it): running
    // it again could repeat its effects, so the model is told instead.
    return {
      exitCode: -1,
      output: "[This call was started earlier but its result was lost (the sandbox restarted?); it was not run again.]",
      timedOut: false,
      cutBytes: 0,
    };
  }
  if (!m) {
    throw new SandboxToolError(
      `the sandbox did not run the tool (exit ${res.exitCode}): ${(res.stderr || out).slice(0, 500)}`,
    );
  }
  const exitCode = Number(m[1]);
  const size = Number(m[2]);
  let body = out.slice(nl + 1);
  let cutBytes = 0;
  const at = body.indexOf(`\n${cut}\n`);
  if (size > input.maxOutputBytes && at >= 0) {
    cutBytes = size - 2 * Math.floor(input.maxOutputBytes / 2);
    body = `${body.slice(0, at)}\n[... output cut: ${cutBytes} bytes in the middle left out ...]\n${body.slice(at + cut.length + 2)}`;
  }
  // coreutils timeout: 124 after TERN_TIMEOUT seconds (TERM), 137 when it had to KILL.
  return { exitCode, output: body, timedOut: exitCode === 124 || exitCode === 137, cutBytes };
};
