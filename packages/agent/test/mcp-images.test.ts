import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { createLogger } from "@tern/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectMcpServers } from "../src/mcp/session.ts";

/**
 * An MCP tool's image content is passed on to the model as an image (OpenHands' ImageContent),
 * beside its text; an image of a type no provider takes is named instead. A real MCP server
 * (the official SDK's server side) on loopback.
 */
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

let http: Server;
let url = "";

beforeAll(async () => {
  http = createServer(async (req, res) => {
    const server = new McpServer({ name: "pictures", version: "1.0.0" });
    server.registerTool("snap", { description: "A screenshot." }, async () => ({
      content: [
        { type: "text", text: "the page:" },
        { type: "image", data: PNG, mimeType: "image/png" },
        { type: "image", data: "AAAA", mimeType: "image/tiff" },
      ],
    }));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
});

afterAll(async () => {
  http?.closeAllConnections();
  await new Promise<void>((resolve) => (http ? http.close(() => resolve()) : resolve()));
});

describe("an MCP tool's image", () => {
  it("becomes an image block of the observation; an unsupported type is named in the text", async () => {
    const set = await connectMcpServers(
      { mcpServers: { pics: { url } } },
      {
        // An HTTP server only: the sandbox is never asked for anything.
        sandboxes: {
          exec: () => Promise.reject(new Error("no sandbox")),
          openProcess: () => Promise.reject(new Error("no sandbox")),
        },
        sandboxRef: null,
        workspaceDir: "/workspace/project",
        settings: { MCP_ALLOW_HTTP: true, MCP_ALLOW_PRIVATE: true },
        secrets: {},
        logger: createLogger("mcp-images-test", "silent"),
      },
    );
    try {
      const outcome = await set.call("pics__snap", {}, { maxOutputBytes: 30_000 });
      expect(outcome.isError).toBe(false);
      expect(outcome.observation.content).toEqual([
        { type: "text", text: "the page:\n[image 1, shown below]\n[image content not shown]" },
        { type: "image", image_urls: [`data:image/png;base64,${PNG}`] },
      ]);
    } finally {
      await set.close();
    }
  });
});
