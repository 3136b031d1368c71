import type { AgentServerRoutes } from "../context.ts";
import { newAgentServerRouter } from "../context.ts";

/** `/api/conversations` and `/api/conversations/{id}/events` of the agent server (issue 21). */
export const agentConversationRoutes: AgentServerRoutes = (_deps) => newAgentServerRouter();
