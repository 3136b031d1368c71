import type { AgentServerRoutes } from "../context.ts";
import { newAgentServerRouter } from "../context.ts";

/** `/api/bash`, `/api/file` and `/api/git` of the agent server (issue 21). */
export const agentSandboxOpsRoutes: AgentServerRoutes = (_deps) => newAgentServerRouter();
