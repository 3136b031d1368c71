import { randomUUID } from "node:crypto";
import { type EventKind, type StoredEvent, type StoredEventOf, textOfContent } from "@tern/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentRunContext, runAgent } from "../src/loop.ts";
import { createRunFixture, type RunFixture } from "./run-fixture.ts";

/**
 * What a run takes from its user: secrets as the commands' environment, masked in all
 * it stores; the user's own LLM key; cost in the MetricsSnapshot counters and the budget.
 */
let fx: RunFixture;
beforeAll(async () => {
  fx = await createRunFixture();
});
afterAll(async () => fx?.close());

const CANARY = `canary-${randomUUID()}`;
const call = (name: string, args: Record<string, unknown>) => ({ name, arguments: args });
const of = <K extends EventKind>(events: StoredEvent[], kind: K) =>
  events.filter((e): e is StoredEventOf<K> => e.kind === kind);

const context = (over: Partial<AgentRunContext> = {}): AgentRunContext => ({
  secrets: {},
  llm: null,
  maxIterations: null,
  maxBudgetPerTask: null,
  ...over,
});

const runWith = async (conversationId: string, ctx: AgentRunContext, settings: Record<string, unknown> = {}) => {
  const deps = fx.depsFor("openai");
  const outcome = await runAgent(
    { ...deps, settings: { ...deps.settings, ...settings }, runContext: async () => ctx },
    conversationId,
    randomUUID(),
  );
  return { outcome, conversation: await fx.conversation(conversationId) };
};

describe("secrets in a run", () => {
  it("are environment variables of the agent's commands, and masked in every event the run stores", async () => {
    const { conversationId } = await fx.newConversation({ message: "Use the token." });
    fx.llm.push(
      { toolCalls: [call("terminal", { command: 'echo "token=$API_TOKEN"; printenv API_TOKEN | wc -c' })] },
      // The model repeats the value it should never have seen (say the user pasted it): masked too.
      { text: `Done; the token was ${CANARY}.` },
    );
    const { conversation } = await runWith(conversationId, context({ secrets: { API_TOKEN: CANARY } }));
    expect(conversation.executionStatus).toBe("finished");
    const events = await fx.events(conversationId);
    const observation = of(events, "ObservationEvent")[0]?.payload.observation;
    const text = textOfContent(observation?.content ?? []);
    expect(text).toContain("token=<secret:API_TOKEN>");
    // The command saw the real value (its length, newline included).
    expect(text).toContain(String(CANARY.length + 1));
    expect(JSON.stringify(events)).not.toContain(CANARY);
    expect(JSON.stringify(of(events, "MessageEvent").at(-1)?.payload)).toContain("<secret:API_TOKEN>");
    // What the model was shown came from the stored (masked) events.
    expect(JSON.stringify(fx.llm.requests.at(-1)?.body)).not.toContain(CANARY);
  });
});

describe("the user's LLM", () => {
  it("uses the user's own key and base URL, and never the operator's key", async () => {
    const { conversationId } = await fx.newConversation({ message: "Hi" });
    fx.llm.push({ text: "hello" });
    const { conversation } = await runWith(
      conversationId,
      context({ llm: { model: "my-model", baseUrl: fx.llm.openaiBaseUrl, apiKey: "user-own-key" } }),
      { LLM_USER_BASE_URLS: [fx.llm.url] },
    );
    expect(conversation.executionStatus).toBe("finished");
    const req = fx.llm.requests.at(-1);
    expect(req?.body.model).toBe("my-model");
    expect(req?.headers.authorization).toBe("Bearer user-own-key");
  });

  it("refuses a user's base URL inside the deployment unless LLM_USER_BASE_URLS allows it", async () => {
    const { conversationId } = await fx.newConversation({ message: "Hi" });
    const before = fx.llm.requests.length;
    const { conversation } = await runWith(
      conversationId,
      context({ llm: { model: "m", baseUrl: fx.llm.openaiBaseUrl, apiKey: "k" } }),
    );
    expect(conversation.executionStatus).toBe("error");
    expect(fx.llm.requests.length).toBe(before);
  });
});

describe("cost and budget", () => {
  // 1 USD per token both ways: a call of 10 + 5 tokens costs 15 USD.
  const prices = { LLM_PRICES: { "gpt-test": { input: 1_000_000, output: 1_000_000 } } };

  it("adds each call's cost to the conversation's metrics, from the price table", async () => {
    const { conversationId } = await fx.newConversation({ message: "Hi" });
    fx.llm.push({ text: "hello", usage: { input: 10, output: 5 } });
    const { conversation } = await runWith(conversationId, context(), prices);
    expect(conversation.metrics).toMatchObject({ accumulated_cost: 15, prompt_tokens: 10, completion_tokens: 5 });
    expect(conversation.metrics.per_turn_token).toBe(15);
  });

  it("stops the run with a clear AgentErrorEvent once max_budget_per_task is reached", async () => {
    const { conversationId } = await fx.newConversation({ message: "Work." });
    fx.llm.push(
      { toolCalls: [call("think", { thought: "a" })], usage: { input: 10, output: 5 } },
      { toolCalls: [call("think", { thought: "b" })], usage: { input: 10, output: 5 } },
      { text: "never sent" },
    );
    const before = fx.llm.requests.length;
    const { conversation } = await runWith(conversationId, context({ maxBudgetPerTask: 20 }), prices);
    expect(conversation.executionStatus).toBe("error");
    // Two calls (15, then 30 USD): the third would go past 20.
    expect(fx.llm.requests.length - before).toBe(2);
    expect(conversation.metrics).toMatchObject({ accumulated_cost: 30, max_budget_per_task: 20 });
    const error = String(of(await fx.events(conversationId), "AgentErrorEvent").at(-1)?.payload.error);
    expect(error).toMatch(/reached its budget: it spent \$30\.0000 of max_budget_per_task \$20/);
    fx.llm.clear();
  });

  it("holds the server's MAX_BUDGET_PER_TASK when the user set none", async () => {
    const { conversationId } = await fx.newConversation({ message: "Work." });
    fx.llm.push({ toolCalls: [call("think", { thought: "a" })], usage: { input: 10, output: 5 } }, { text: "no" });
    const before = fx.llm.requests.length;
    const { conversation } = await runWith(conversationId, context(), { ...prices, MAX_BUDGET_PER_TASK: 10 });
    expect(conversation.executionStatus).toBe("error");
    // One call (15 USD): past the server's 10, so the second is never asked, and the error says why.
    expect(fx.llm.requests.length - before).toBe(1);
    const error = String(of(await fx.events(conversationId), "AgentErrorEvent").at(-1)?.payload.error);
    expect(error).toMatch(/reached its budget: it spent \$15\.0000 of max_budget_per_task \$10\b/);
    fx.llm.clear();
  });
});
