import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { SSEServerTransport } from "@modelcontextprotocol/sdk/server/sse.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

/**
 * A remote MCP server written with the official SDK's server side, on loopback: streamable HTTP,
 * stateless (a server and transport per request, as the SDK's stateless example does). Its tools:
 * `add` (numbers), `whoami` (echoes the request headers it got: a server that leaks what it was
 * sent), `hang` (never answers), `big` (a long output).
 */
export const startTestMcpServer = async () => {
  const requests: { method: string; headers: IncomingHttpHeaders }[] = [];
  const build = (headers: IncomingHttpHeaders) => {
    const server = new McpServer({ name: "test-remote", version: "1.0.0" });
    server.registerTool(
      "add",
      { description: "Adds two numbers.", inputSchema: { a: z.number(), b: z.number() } },
      async ({ a, b }) => ({ content: [{ type: "text", text: `sum=${a + b}` }] }),
    );
    server.registerTool("whoami", { description: "Says what the caller sent." }, async () => ({
      content: [{ type: "text", text: `headers=${JSON.stringify(headers)}` }],
    }));
    server.registerTool("hang", { description: "Never answers." }, () => new Promise<never>(() => {}));
    server.registerTool(
      "big",
      { description: "A long output.", inputSchema: { bytes: z.number().int() } },
      async ({ bytes }) => ({ content: [{ type: "text", text: "x".repeat(bytes) }] }),
    );
    return server;
  };
  // The older SSE transport (an event stream at /sse, messages POSTed to /messages), for old servers.
  const sseSessions = new Map<string, SSEServerTransport>();
  const http: Server = createServer(async (req, res) => {
    requests.push({ method: req.method ?? "", headers: req.headers });
    const path = new URL(req.url ?? "/", "http://x").pathname;
    if (path === "/sse" && req.method === "GET") {
      const transport = new SSEServerTransport("/messages", res);
      sseSessions.set(transport.sessionId, transport);
      res.on("close", () => sseSessions.delete(transport.sessionId));
      await build(req.headers).connect(transport);
      return;
    }
    if (path === "/messages" && req.method === "POST") {
      const session = sseSessions.get(new URL(req.url ?? "/", "http://x").searchParams.get("sessionId") ?? "");
      if (!session) res.writeHead(404).end();
      else await session.handlePostMessage(req, res);
      return;
    }
    if (req.method !== "POST") {
      res.writeHead(405).end();
      return;
    }
    const server = build(req.headers);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const port = (http.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    sseUrl: `http://127.0.0.1:${port}/sse`,
    port,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
};

export type TestMcpServer = Awaited<ReturnType<typeof startTestMcpServer>>;

/**
 * A stdio MCP server as a small dependency-free Python script (stdlib only), to run inside the
 * sandbox: newline-delimited JSON-RPC on stdin/stdout. Tools: `pid` (its process id), `echo`,
 * `crash` (the process dies mid-call, before answering), `sleep` (hangs), `env`; none at all with NO_TOOLS set; with ODD_TOOLS, one whose
 * schema is too big and one whose name no provider takes. With ENDLESS_PAGES (seconds), its
 * tools/list never ends: every page, after that wait, is empty and names a next one (each page
 * asked is a line in PAGES_FILE, when set).
 */
export const STDIO_SERVER_PY = String.raw`
import json, os, sys, time

TOOLS = [] if os.environ.get("NO_TOOLS") else [
    {"name": "pid", "description": "The server's process id.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "echo", "description": "Echoes text.", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "crash", "description": "Dies mid-call.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "sleep", "description": "Hangs.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "env", "description": "An environment variable.", "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}}},
]

if os.environ.get("ODD_TOOLS"):
    TOOLS.append({"name": "wide", "description": "A schema too big to offer.", "inputSchema": {"type": "object",
        "properties": {"p%d" % i: {"type": "string", "description": "x" * 40} for i in range(1000)}}})
    TOOLS.append({"name": "bad name!", "description": "A name no provider takes.", "inputSchema": {"type": "object"}})

def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()

def text(t):
    return {"content": [{"type": "text", "text": t}]}

for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    msg = json.loads(line)
    mid, method = msg.get("id"), msg.get("method")
    if mid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "py-stdio", "version": "1.0"}}})
    elif method == "tools/list" and os.environ.get("ENDLESS_PAGES"):
        time.sleep(float(os.environ["ENDLESS_PAGES"]))
        if os.environ.get("PAGES_FILE"):
            with open(os.environ["PAGES_FILE"], "a") as f:
                f.write("page\n")
        page = int(((msg.get("params") or {}).get("cursor") or "p0")[1:])
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [], "nextCursor": "p%d" % (page + 1)}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        name, args = msg["params"]["name"], msg["params"].get("arguments") or {}
        if name == "pid":
            send({"jsonrpc": "2.0", "id": mid, "result": text("pid=%d" % os.getpid())})
        elif name == "echo":
            send({"jsonrpc": "2.0", "id": mid, "result": text("echo=" + args.get("text", ""))})
        elif name == "env":
            send({"jsonrpc": "2.0", "id": mid, "result": text("env=" + os.environ.get(args.get("name", ""), ""))})
        elif name == "crash":
            os._exit(3)
        elif name == "sleep":
            time.sleep(3600)
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": "unknown tool"}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
`;

/** A "server" that answers the handshake with text that is not JSON-RPC. */
export const MALFORMED_SERVER_PY = String.raw`
import sys
for line in sys.stdin:
    sys.stdout.write("this is not json-rpc\n")
    sys.stdout.flush()
`;
