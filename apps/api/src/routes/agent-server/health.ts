import { agentServerToolNames } from "@tern/services";
import type { Hono } from "hono";
import type { ApiDeps } from "../../deps.ts";
import type { AgentServerEnv } from "./context.ts";

/** The openhands-agent-server version whose API this serves (its contract: test/fixtures/openhands/agent-server.json). */
const AGENT_SERVER_API_VERSION = "1.43.1";

const startedAt = Date.now();

/**
 * The agent server's open health routes (server_details_router.py), with its bodies. They say
 * nothing of the sandbox the URL names, so they answer alike for any id (none is revealed). `/ready`
 * is 503 "initializing" while no worker is alive to carry out what needs the sandbox (known only
 * when this process has the worker directory).
 */
export const registerAgentHealth = (router: Hono<AgentServerEnv>, deps: ApiDeps) => {
  router.get("/alive", (c) => c.json({ status: "ok" }));
  router.get("/health", (c) => c.json({ status: "ok" }));
  router.get("/ready", async (c) => {
    const alive = deps.workersAlive ? await deps.workersAlive().catch(() => 0) : null;
    if (alive === 0) return c.json({ status: "initializing", message: "Server is still initializing" }, 503);
    return c.json({ status: "ready" });
  });
  router.get("/server_info", (c) => {
    const uptime = Math.floor((Date.now() - startedAt) / 1000);
    return c.json({
      uptime,
      idle_time: 0,
      title: "OpenHands Agent Server",
      version: AGENT_SERVER_API_VERSION,
      sdk_version: AGENT_SERVER_API_VERSION,
      tools_version: AGENT_SERVER_API_VERSION,
      workspace_version: "unknown",
      build_git_sha: "unknown",
      build_git_ref: "unknown",
      python_version: `tern (node ${process.versions.node})`,
      // The tools a client may name in StartConversationRequest: the agent's registry, by the SDK's names.
      usable_tools: agentServerToolNames,
      runtime_idle_timeout_seconds: null,
      // No credential binding: the LLM key and git tokens stay on the worker.
      capabilities: [],
      max_foreground_terminal_timeout_seconds: null,
      docs: "/docs",
      redoc: "/redoc",
    });
  });
};
