import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Resolver } from "@tern/core";
import { startLlmServer } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chooseLlm, type LlmSettings, type UserLlmSettings } from "./select.ts";
import { type LlmClient, LlmError } from "./types.ts";

// A user's LLM endpoint is called through the checked client (core's outbound-fetch.ts): resolved
// and checked at each request, pinned, no redirect followed, and its error texts not echoed.

const serve = async (handler: (req: IncomingMessage, res: ServerResponse) => void) => {
  const server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, port: (server.address() as AddressInfo).port };
};

/** Stands for a service inside the deployment: it must never be reached. */
let inside: Server;
let insidePort = 0;
let insideHits = 0;
/** The user's endpoint, answering as each test scripts it. */
let endpoint: Server;
let endpointPort = 0;
let endpointHits = 0;
let answer: (res: ServerResponse) => void = () => {};

beforeAll(async () => {
  ({ server: inside, port: insidePort } = await serve((_req, res) => {
    insideHits++;
    res.writeHead(200, { "content-type": "application/json" }).end(
      JSON.stringify({
        id: "x",
        object: "chat.completion",
        created: 0,
        model: "m",
        choices: [{ index: 0, message: { role: "assistant", content: "INSIDE-CANARY" }, finish_reason: "stop" }],
      }),
    );
  }));
  ({ server: endpoint, port: endpointPort } = await serve((req, res) => {
    endpointHits++;
    req.resume();
    answer(res);
  }));
});
afterAll(async () => {
  await new Promise<void>((r) => inside.close(() => r()));
  await new Promise<void>((r) => endpoint.close(() => r()));
});

/** Names only this map knows (never real DNS). */
const hosts: Resolver = async (host) => {
  const map: Record<string, string> = { "llm.rebind.example": "127.0.0.1", "llm.pinned.example": "127.0.0.1" };
  const address = map[host.toLowerCase().replace(/\.$/, "")];
  if (!address) throw new Error(`${host}: unknown`);
  return [{ address, family: 4 }];
};

const operator: LlmSettings = { LLM_PROVIDER: "openai", LLM_API_KEY: "operator-key", LLM_MODEL: "gpt-x" };
const user = (baseUrl: string): UserLlmSettings => ({ model: "m", baseUrl, apiKey: "user-key" });
const ask = (client: LlmClient) =>
  client.complete({ system: "s", messages: [{ role: "user", text: "hi" }], tools: [] }).then(
    () => null,
    (err: unknown) => err,
  );
const clientOf = (settings: LlmSettings, baseUrl: string): LlmClient => {
  const choice = chooseLlm(
    settings,
    null,
    { retry: { maxWaitMs: 0 }, timeoutMs: 10_000, resolve: hosts },
    user(baseUrl),
  );
  if (!choice.ok) throw new Error(choice.reason);
  return choice.client;
};

describe("a user's LLM endpoint", () => {
  it("refuses localhost with a trailing dot or in upper case before any call", () => {
    for (const url of [`https://localhost.:${insidePort}/v1`, `https://LOCALHOST.:${insidePort}/v1`]) {
      const choice = chooseLlm(operator, null, { resolve: hosts }, user(url));
      expect(choice.ok, url).toBe(false);
      expect(!choice.ok && choice.reason).toMatch(/inside the deployment/);
    }
  });

  it("refuses a name that resolves to a loopback address, without connecting", async () => {
    const before = insideHits;
    const err = await ask(
      clientOf({ ...operator, LLM_USER_BASE_URLS: ["*"] }, `https://llm.rebind.example:${insidePort}/v1`),
    );
    expect(err).toBeInstanceOf(LlmError);
    expect((err as Error).message).toMatch(/refused: llm_base_url resolves to 127\.0\.0\.1/);
    expect(insideHits).toBe(before);
  });

  it("connects to the address it checked: an entry's name only the resolver knows still reaches the endpoint", async () => {
    const llm = await startLlmServer([{ text: "hello" }]);
    try {
      const port = new URL(llm.url).port;
      const base = `http://llm.pinned.example:${port}/v1`;
      const res = await clientOf({ ...operator, LLM_USER_BASE_URLS: [base] }, base).complete({
        system: "s",
        messages: [{ role: "user", text: "hi" }],
        tools: [],
      });
      expect(res.text).toBe("hello");
      expect(llm.requests.at(-1)?.headers.authorization).toBe("Bearer user-key");
    } finally {
      await llm.close();
    }
  });

  it("follows no redirect, even from an operator's entry to a private http address", async () => {
    const base = `http://127.0.0.1:${endpointPort}/v1`;
    answer = (res) =>
      res.writeHead(307, { location: `http://127.0.0.1:${insidePort}/v1/chat/completions` }).end("moved");
    const before = insideHits;
    const hitsBefore = endpointHits;
    const err = await ask(clientOf({ ...operator, LLM_USER_BASE_URLS: [base] }, base));
    expect(endpointHits).toBeGreaterThan(hitsBefore);
    expect(insideHits).toBe(before);
    expect(err).toBeInstanceOf(LlmError);
    expect((err as Error).message).not.toContain("INSIDE-CANARY");
    expect((err as Error).message).toMatch(/HTTP 307/);
  });

  it("does not echo the body of a refusal: its status and error code only", async () => {
    const base = `http://127.0.0.1:${endpointPort}/v1`;
    answer = (res) =>
      res
        .writeHead(500, { "content-type": "application/json" })
        .end(JSON.stringify({ error: { message: "BODY-CANARY internal page", code: "server_error" } }));
    const err = await ask(clientOf({ ...operator, LLM_USER_BASE_URLS: [base] }, base));
    expect(err).toBeInstanceOf(LlmError);
    expect((err as Error).message).toBe("LLM request failed: the LLM endpoint answered HTTP 500 (server_error)");
    // The whole text stays on the cause, for the log.
    expect(String((err as Error).cause)).toContain("BODY-CANARY");
  });
});
