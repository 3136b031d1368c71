import { z } from "zod";

/** Seconds without new output after which a call returns (exit code -1), when no `timeout` is given. */
export const DEFAULT_NO_CHANGE_TIMEOUT_SECONDS = 30;
/** Longest one call may wait when the model gives a `timeout`, in seconds. */
const MAX_CALL_TIMEOUT_SECONDS = 24 * 3600;
/** Commands travel in the exec's environment; a larger program belongs in a file. */
const MAX_COMMAND_BYTES = 100_000;

/** OpenHands' `TerminalAction` parameters, with its meanings. */
export const terminalArgs = z
  .object({
    command: z
      .string()
      .describe(
        "The shell command to execute. Can be empty string to view additional logs when the previous exit code is " +
          "`-1`. Can be a special key name when `is_input` is True: `C-c` (Ctrl+C), `C-d` (Ctrl+D/EOF), `C-z` " +
          "(Ctrl+Z), or any `C-<letter>` for Ctrl sequences; navigation keys `UP`, `DOWN`, `LEFT`, `RIGHT`, `HOME`, " +
          "`END`, `PGUP`, `PGDN`; and `TAB`, `ESC`, `BS` (Backspace), `ENTER`. You can only execute one command at a time.",
      ),
    is_input: z
      .boolean()
      .optional()
      .describe(
        "If True, the command is an input to the running process. If False, the command is executed in the " +
          "terminal session. Default is False.",
      ),
    timeout: z
      .number()
      .positive()
      .max(MAX_CALL_TIMEOUT_SECONDS)
      .optional()
      .describe(
        "Optional. Sets a maximum time limit (in seconds) for this call. If the command takes longer, the call " +
          "returns what it printed so far (exit code -1) and the command keeps running. Without it, the call returns " +
          "when the command prints nothing new for a while. Use a higher value if the command is expected to take " +
          "a long time (like installation or testing), or if it has a known fixed duration (like sleep).",
      ),
    reset: z
      .boolean()
      .optional()
      .describe(
        "If True, reset the terminal by creating a new session. Use this only when the terminal becomes " +
          "unresponsive. All previously set environment variables and session state will be lost. Cannot be used " +
          "with is_input=True.",
      ),
  })
  .superRefine((a, ctx) => {
    if (a.reset && a.is_input)
      ctx.addIssue({ code: "custom", path: ["reset"], message: "cannot be used with is_input" });
    if (Buffer.byteLength(a.command) > MAX_COMMAND_BYTES) {
      ctx.addIssue({
        code: "custom",
        path: ["command"],
        message: `longer than ${MAX_COMMAND_BYTES} bytes: write a script with file_editor and run it`,
      });
    }
  });

export const terminalDescription = [
  "Execute a bash command in the terminal within a persistent shell session.",
  "",
  "### Command Execution",
  "* One command at a time: you can only execute one shell command at a time. To run several in order, chain",
  "  them with `&&` or `;`.",
  "* Persistent session: environment variables, virtual environments, shell functions, aliases, the working",
  "  directory and background processes persist across commands.",
  "* Soft timeout: a command that prints nothing new for a while returns what it printed so far, with exit",
  "  code -1; it keeps running unless you stop it. Give a `timeout` to wait longer (or shorter) in one call.",
  "* Shell options: do NOT use `set -e`, `set -eu`, or `set -euo pipefail` (they would end the session's shell).",
  "",
  "### Long-running Commands",
  "* For commands that may run indefinitely, run them in the background and redirect output to a file, e.g.",
  "  `python3 app.py > server.log 2>&1 &`.",
  "* If a command returns exit code `-1` it is still running. With `is_input=true` you can:",
  "  - send an empty `command` to retrieve additional output",
  "  - send text to its standard input (answer a prompt)",
  "  - send control keys like `C-c`, `C-d` or `C-z`, or keys like `UP`, `DOWN`, `TAB`, `ESC`, `ENTER`",
  "* A new command is refused while the previous one runs.",
  "",
  "### Output Handling",
  "* Long output is cut in the middle; the observation names a file in the sandbox holding all of it.",
  "",
  "### Terminal Reset",
  "* Set `reset=true` to start a fresh terminal session if the current one becomes unresponsive; it clears",
  "  environment variables, the working directory and the session's running processes.",
].join("\n");
