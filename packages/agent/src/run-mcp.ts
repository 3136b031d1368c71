import { maskSecrets, mcpTransportOf, newEvent } from "@tern/core";
import { connectMcpServers, type McpToolSet } from "./mcp/session.ts";
import type { RunScope } from "./scope.ts";
import { anySignal } from "./tools/terminal/interrupt.ts";

/**
 * The user's MCP servers for one run, connected when it starts (stdio ones started in the
 * sandbox). How each fared is one `mcp_servers` state update and, for each server left out, a log
 * line: a server that fails never fails the run. Null when the user has none.
 */
export const startMcpServers = async (run: RunScope): Promise<McpToolSet | null> => {
  const { deps, conversation, context, log } = run;
  const config = context.mcpConfig;
  if (!config || Object.keys(config.mcpServers).length === 0) return null;
  const sandbox = await run.store.sandboxOf(conversation);
  let set: McpToolSet;
  try {
    set = await connectMcpServers(config, {
      sandboxes: deps.sandboxes,
      sandboxRef: sandbox.ref,
      workspaceDir: conversation.workspaceDir,
      settings: deps.settings,
      secrets: context.secrets,
      logger: log,
      // The start-up waits on servers the user named: a pause ends it too, not only an interrupt.
      signal: anySignal(deps.interrupt, deps.pause, deps.shutdown),
    });
  } catch (err) {
    // A fault of ours, not of one server: the run goes on without MCP rather than fail.
    const message = maskSecrets((err as Error).message ?? String(err), context.secrets);
    log.error({ error: message }, "MCP servers could not be set up; the run goes on without them");
    const reason = `MCP could not be set up: ${message}`;
    await run.sink.append([
      newEvent.stateUpdate(
        "mcp_servers",
        Object.entries(config.mcpServers).map(([name, server]) => ({
          name,
          transport: mcpTransportOf(server),
          status: "failed",
          tools: 0,
          reason,
        })),
      ),
    ]);
    return null;
  }
  for (const s of set.status) {
    if (s.status === "failed" || s.status === "skipped") {
      log.warn({ mcp_server: s.name, transport: s.transport, reason: s.reason }, "MCP server left out of the run");
    } else if (s.status === "ready") {
      log.info({ mcp_server: s.name, transport: s.transport, tools: s.tools }, "MCP server connected");
    }
  }
  try {
    await run.sink.append([newEvent.stateUpdate("mcp_servers", set.status)]);
  } catch (err) {
    await set.close();
    throw err;
  }
  return set;
};
