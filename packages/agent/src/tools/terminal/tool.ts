import type { Observation } from "@tern/core";
import type { z } from "zod";
import type { SandboxCallContext } from "../run-once.ts";
import { defineTool } from "../tool.ts";
import { DEFAULT_NO_CHANGE_TIMEOUT_SECONDS, terminalArgs, terminalDescription } from "./definition.ts";
import { specialKey } from "./keys.ts";
import { runOneShot } from "./one-shot.ts";
import { callTerminal, type TerminalCall, type TerminalResult } from "./session.ts";

type TerminalArgs = z.infer<typeof terminalArgs>;

/** `env` is the shell's environment, exported again before each command (the secrets may change). */
export interface TerminalToolContext extends SandboxCallContext {
  /** Seconds without new output before a call returns (TERMINAL_NO_CHANGE_TIMEOUT_SECONDS). */
  noChangeTimeoutSeconds?: number;
  /** A call already claimed waits only this long for its result (an interrupted run), then reports it pending. */
  attachMs?: number;
  /** Ctrl-C to the shell first, then the call's result as a later call of it reads it (one exec). */
  interruptFirst?: boolean;
  /** Stops waiting on the sandbox (interrupt, shutdown); what runs there goes on. */
  signal?: AbortSignal;
}

export interface TerminalOutcome {
  text: string;
  isError: boolean;
  observation: Observation;
  /** The call's result is not there yet (attachMs passed): it stays pending, to be read later. */
  pending: boolean;
}

const TIMEOUT_HELP =
  "You may wait longer to see additional output by sending empty command '', send other commands to interact " +
  'with the current process, send keys ("C-c", "C-z", "C-d") to interrupt/kill the previous command before ' +
  "sending your new command, or use the timeout parameter in terminal for future commands.";

const RESET_TEXT =
  "Terminal session has been reset. All previous environment variables and session state have been cleared.";

const envName = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** `export` lines for the secrets, so a secret added since the shell started is there too (as OpenHands does). */
const secretExports = (env: Record<string, string> | undefined): string =>
  Object.entries(env ?? {})
    .filter(([k]) => envName.test(k))
    .map(([k, v]) => `export ${k}='${v.replaceAll("'", `'\\''`)}'`)
    .join("\n");

/** Lines without the spaces the terminal pads them with. */
const tidy = (text: string): string =>
  text
    .split("\n")
    .map((l) => l.trimEnd())
    .join("\n");

const describe = (args: TerminalArgs, r: TerminalResult, noChangeSeconds: number, previous: boolean): string => {
  const command = args.command.trim();
  const key = args.is_input ? specialKey(command) : null;
  let output = tidy(r.output);
  // What was typed shows in the terminal as it is echoed back: not news to the model.
  if (args.is_input && !key && command && output.trimStart().startsWith(command)) {
    output = output.trimStart().slice(command.length).replace(/^\n/, "");
  }
  const parts: string[] = [];
  if (r.newShell) {
    parts.push(
      "[A new shell was started: the previous one had ended, so environment variables, the working directory and its jobs were reset.]",
    );
  }
  const below = previous && output ? "[Below is the output of the previous command.]\n" : "";
  const cutNote =
    r.cutBytes > 0
      ? `\n[Output was cut: ${r.cutBytes} bytes in the middle were left out.${r.fullOutputPath ? ` The whole output is in ${r.fullOutputPath}.` : ""}]`
      : "";
  switch (r.status) {
    case "completed": {
      const sent = key ? ` ${key.replace(/^C-(.)$/, (_, c: string) => `CTRL+${c.toUpperCase()}`)} was sent.` : "";
      parts.push(`${below}${output}${cutNote}\n[The command completed with exit code ${r.exitCode}.${sent}]`);
      break;
    }
    case "no_change":
      parts.push(
        `${below}${output}${cutNote}\n[The command has no new output after ${noChangeSeconds} seconds. ${TIMEOUT_HELP}]`,
      );
      break;
    case "hard_timeout":
      parts.push(`${below}${output}${cutNote}\n[The command timed out after ${args.timeout} seconds. ${TIMEOUT_HELP}]`);
      break;
    case "refused":
      parts.push(
        `${output ? `[Below is the output of the previous command.]\n${output}` : ""}${cutNote}\n` +
          `[Your command "${command}" is NOT executed. The previous command is still running - You CANNOT send new ` +
          `commands until the previous command is completed. By setting \`is_input\` to \`true\`, you can interact ` +
          `with the current process: ${TIMEOUT_HELP}]`,
      );
      break;
    case "idle":
      parts.push(
        command
          ? "No previous running command to interact with."
          : "No previous running command to retrieve logs from.",
      );
      break;
    case "exited":
      parts.push(
        `${output}${cutNote}\n[The shell exited (an \`exit\` or \`exec\` ended it). The next command starts a new shell: ` +
          "environment variables, the working directory and jobs of this one are gone.]",
      );
      break;
    case "reset":
      parts.push(RESET_TEXT);
      break;
    case "lost":
      parts.push(
        "[This call was started earlier, but its result was lost (the sandbox restarted); it was not run again. " +
          "Check its effects before running it again.]",
      );
      break;
    default:
      parts.push(output || "The terminal failed.");
  }
  let text = parts.join("\n").replace(/^\n+/, "");
  if (r.status === "completed" && r.workingDir) text += `\n[Current working directory: ${r.workingDir}]`;
  if (r.status === "completed" && r.pythonInterpreter) text += `\n[Python interpreter: ${r.pythonInterpreter}]`;
  return text;
};

const isErrorStatus = (r: TerminalResult) =>
  ["refused", "idle", "exited", "lost", "error", "hard_timeout"].includes(r.status);

const observationOf = (args: TerminalArgs, r: TerminalResult, text: string): Observation => ({
  kind: "TerminalObservation",
  command: args.command,
  is_input: args.is_input ?? false,
  exit_code: r.status === "completed" || r.status === "reset" ? r.exitCode : -1,
  timed_out: r.status === "hard_timeout",
  status: r.status,
  output_cut_bytes: r.cutBytes,
  full_output_path: r.fullOutputPath,
  metadata: { working_dir: r.workingDir, py_interpreter_path: r.pythonInterpreter },
  content: [{ type: "text" as const, text }],
  is_error: isErrorStatus(r),
});

/**
 * The `terminal` tool: one call on the conversation's live shell (tools/terminal/controller.sh).
 * `reset` with a command resets, then runs the command (a second claim, `<action>-run`).
 */
export const runTerminal = async (args: TerminalArgs, ctx: TerminalToolContext): Promise<TerminalOutcome> => {
  const command = args.command.trim();
  const noChangeSeconds = ctx.noChangeTimeoutSeconds ?? DEFAULT_NO_CHANGE_TIMEOUT_SECONDS;
  const base: Omit<TerminalCall, "mode" | "actionId"> = {
    sandbox: ctx.sandbox,
    sandboxRef: ctx.sandboxRef,
    hardTimeoutMs: args.timeout ? args.timeout * 1000 : 0,
    noChangeTimeoutMs: noChangeSeconds * 1000,
    maxOutputBytes: ctx.maxOutputBytes,
    cwd: ctx.workspaceDir,
    ...(ctx.env ? { env: ctx.env } : {}),
    ...(ctx.attachMs ? { attachMs: ctx.attachMs } : {}),
    ...(ctx.signal ? { signal: ctx.signal } : {}),
  };
  const exports = secretExports(ctx.env);
  const runCall = (actionId: string): TerminalCall => ({
    ...base,
    actionId,
    mode: "run",
    text: exports ? `${exports}\n${args.command}` : args.command,
  });

  let r: TerminalResult;
  let prefix = "";
  if (ctx.interruptFirst) {
    r = await callTerminal({ ...base, actionId: ctx.actionId, mode: "interrupt" });
  } else if (args.reset) {
    r = await callTerminal({ ...base, actionId: ctx.actionId, mode: "reset" });
    if (command && r.status === "reset") {
      prefix = `${RESET_TEXT}\n\n`;
      r = await callTerminal(runCall(`${ctx.actionId}-run`));
    }
  } else if (!command) {
    r = await callTerminal({ ...base, actionId: ctx.actionId, mode: "poll" });
  } else if (args.is_input) {
    r = await callTerminal({
      ...base,
      actionId: ctx.actionId,
      mode: "input",
      text: args.command,
      key: specialKey(command),
    });
  } else {
    r = await callTerminal(runCall(ctx.actionId));
  }
  if (r.status === "notmux") {
    if (command && !args.is_input) {
      return { ...(await runOneShot(args.command, args.timeout, ctx)), pending: false };
    }
    r = {
      ...r,
      status: "error",
      output: "This sandbox predates the live terminal: it takes commands only, each in a fresh bash.",
    };
  }
  const previous = !command || (args.is_input ?? false);
  const text = `${prefix}${describe(args, r, noChangeSeconds, previous)}`;
  return {
    text,
    isError: isErrorStatus(r),
    observation: observationOf(args, r, text),
    pending: r.status === "pending" || r.status === "sent",
  };
};

/** `terminal`: OpenHands' TerminalTool, on the conversation's live shell in the sandbox. */
export const terminalTool = defineTool({
  name: "terminal",
  description: terminalDescription,
  args: terminalArgs,
  traits: {
    instant: false,
    slow: true,
    recorded: true,
    needsSandbox: true,
    readsStoredEvents: false,
    actionKind: "TerminalAction",
    defaultRisk: "UNKNOWN",
  },
  agentServer: { names: ["terminal", "TerminalTool", "BashTool"] },
  run: (args, ctx) =>
    runTerminal(args, {
      sandbox: ctx.sandbox,
      sandboxRef: ctx.sandboxRef,
      workspaceDir: ctx.workspaceDir,
      actionId: ctx.actionId,
      maxOutputBytes: ctx.maxOutputBytes,
      ...(ctx.env ? { env: ctx.env } : {}),
      // 0 is not a timeout: the default applies.
      ...(ctx.noChangeTimeoutSeconds ? { noChangeTimeoutSeconds: ctx.noChangeTimeoutSeconds } : {}),
      ...(ctx.attachMs ? { attachMs: ctx.attachMs } : {}),
      ...(ctx.interruptFirst ? { interruptFirst: true } : {}),
      ...(ctx.signal ? { signal: ctx.signal } : {}),
    }),
});
