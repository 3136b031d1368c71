import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { type JSONRPCMessage, JSONRPCMessageSchema } from "@modelcontextprotocol/sdk/types.js";
import { SANDBOX_STATE_DIR, type SandboxDriver, type SandboxProcess, type SandboxRef } from "@tern/sandbox";

/** A line longer than this is not a message we will hold (a server printing without end). */
const MAX_LINE_BYTES = 8 * 1024 * 1024;

export interface SandboxStdioOptions {
  sandbox: Pick<SandboxDriver, "exec" | "openProcess">;
  sandboxRef: SandboxRef;
  /** The server's name: names its pid file, so a server left by an earlier run is stopped first. */
  server: string;
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd: string;
}

/** Where the server's pid is kept: in the tools' state directory, gone when the sandbox restarts. */
const pidFileOf = (server: string) => `${SANDBOX_STATE_DIR}/mcp-${server}.pid`;

/** Stops the server started under `server`'s name, if one runs. */
const stopSandboxServer = async (
  opts: Pick<SandboxStdioOptions, "sandbox" | "sandboxRef" | "server">,
): Promise<void> => {
  const pidFile = pidFileOf(opts.server);
  await opts.sandbox
    .exec(opts.sandboxRef, {
      cmd: ["sh", "-c", 'p=$(cat "$0" 2>/dev/null) && kill -9 "$p" 2>/dev/null; rm -f "$0"', pidFile],
      timeoutMs: 10_000,
    })
    .catch(() => undefined);
};

/**
 * The MCP SDK's Transport over a process in the conversation's sandbox: newline-delimited JSON-RPC
 * on its stdin and stdout, as MCP's stdio transport speaks it. The server is the user's code, so it
 * runs there, never on the worker. Its pid is kept in the sandbox, so it can be stopped from outside
 * (Docker cannot kill an exec), and a server an earlier run left behind is stopped first.
 */
export class SandboxStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T) => void;
  private process: SandboxProcess | null = null;
  private buffer = "";
  /** The last lines it wrote on stderr, to say why it failed. */
  stderrTail = "";
  /** The last line it wrote that was not a JSON-RPC message. */
  malformed: string | null = null;
  private spoken = false;
  /** Closed: a start still under way stops the process it opens. */
  private closed = false;

  constructor(private readonly opts: SandboxStdioOptions) {}

  async start(): Promise<void> {
    const { sandbox, sandboxRef } = this.opts;
    if (!sandbox.openProcess) throw new Error("this sandbox driver cannot hold a process open");
    await stopSandboxServer(this.opts);
    const process = await sandbox.openProcess(sandboxRef, {
      // $0 is the pid file; the server replaces the shell, so the pid written is its own.
      cmd: ["sh", "-c", 'echo $$ > "$0"; exec "$@"', pidFileOf(this.opts.server), this.opts.command, ...this.opts.args],
      env: this.opts.env,
      cwd: this.opts.cwd,
    });
    if (this.closed) {
      // Closed while the process was being opened (a start-up stopped midway): nothing is left running.
      process.end();
      process.detach();
      await stopSandboxServer(this.opts);
      throw new Error("the server was stopped while it started");
    }
    this.process = process;
    process.onStdout((chunk) => this.read(chunk.toString("utf8")));
    process.onStderr((chunk) => {
      this.stderrTail = (this.stderrTail + chunk.toString("utf8")).slice(-2000);
    });
    void process.closed.then(() => {
      if (this.process === process) {
        this.process = null;
        this.onclose?.();
      }
    });
  }

  private read(text: string): void {
    this.buffer += text;
    if (this.buffer.length > MAX_LINE_BYTES) {
      this.buffer = "";
      this.onerror?.(new Error(`the server wrote a line longer than ${MAX_LINE_BYTES} bytes`));
      return;
    }
    for (let i = this.buffer.indexOf("\n"); i >= 0; i = this.buffer.indexOf("\n")) {
      const line = this.buffer.slice(0, i).replace(/\r$/, "");
      this.buffer = this.buffer.slice(i + 1);
      if (!line.trim()) continue;
      let message: JSONRPCMessage;
      try {
        message = JSONRPCMessageSchema.parse(JSON.parse(line));
      } catch {
        this.malformed = `malformed JSON-RPC from the server: ${JSON.stringify(line.slice(0, 80))}`;
        this.onerror?.(new Error(this.malformed));
        // Before its first good message it is not an MCP server at all: stop waiting on it.
        if (!this.spoken) void this.close();
        continue;
      }
      this.spoken = true;
      this.onmessage?.(message);
    }
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (!this.process) throw new Error("the server is not running");
    this.process.write(`${JSON.stringify(message)}\n`);
  }

  async close(): Promise<void> {
    this.closed = true;
    const process = this.process;
    this.process = null;
    if (process) {
      process.end();
      process.detach();
    }
    await stopSandboxServer(this.opts);
    this.onclose?.();
  }
}
