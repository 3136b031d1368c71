import type { AgentRunContext } from "@tern/agent";
import type { Conversation, Logger, SecretBox } from "@tern/core";
import type { Database } from "@tern/db";
import { agentSecretEnv, agentServerRunContext, userLlmForRun, userMcpConfigForRun } from "@tern/services";
import type { Kysely } from "kysely";

/**
 * What a run takes from its conversation's user, read and opened on the worker for each run: the
 * secrets that become its commands' environment (and are masked in all it stores), their own LLM
 * settings, their limits and their MCP servers. A secret that no longer opens is left out and named in the log.
 */
export const agentRunContext = async (
  deps: { db: Kysely<Database>; secretBox: SecretBox; logger: Logger },
  conversation: Conversation,
): Promise<AgentRunContext> => {
  const [secrets, user, mcpConfig, named] = await Promise.all([
    agentSecretEnv(deps, conversation, (name) =>
      deps.logger.warn({ secret: name }, "a secret does not open under SECRETS_KEY; the run goes on without it"),
    ),
    userLlmForRun(deps, conversation.userId),
    userMcpConfigForRun(deps, conversation.userId, (reason) =>
      deps.logger.warn({ reason }, "the MCP config cannot be read; the run goes on without MCP servers"),
    ),
    // A conversation started on the agent-server API: the LLM, tools, MCP servers and limits its
    // client named (its key counts as the user's own), and its own secrets.
    agentServerRunContext(deps, conversation.id, (what) =>
      deps.logger.warn({ what }, "a value of the conversation does not open under SECRETS_KEY; left out"),
    ),
  ]);
  const agent = named.agent;
  return {
    secrets: { ...secrets, ...named.secrets },
    llm: agent ? agent.llm : user.llm,
    maxIterations: agent ? agent.maxIterations : user.maxIterations,
    maxBudgetPerTask: user.maxBudgetPerTask,
    confirmation: user.confirmation,
    mcpConfig: agent ? agent.mcpConfig : mcpConfig,
    ...(agent ? { tools: agent.tools } : {}),
  };
};
