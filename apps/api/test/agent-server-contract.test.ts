import { randomBytes } from "node:crypto";
import { toHexId } from "@tern/core";
import { sandboxesRepository } from "@tern/db";
import { createConversationFixture } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  agentServerContract,
  type ContractRoute,
  checkResponse,
  differences,
  gapsSeen,
  KNOWN_GAPS,
  NOT_SERVED,
  routeKey,
  SERVED,
} from "./agent-server-contract.ts";
import { startTestApi, type TestApi } from "./harness.ts";

/**
 * tern's agent server (/agent/{sandbox_id}) against OpenHands' openhands-agent-server, as
 * fixtures/openhands/extract_agent_server.py extracted it from the package's routers at a named
 * commit: every route accounted for, the ones served present with their method, every /api route
 * behind the key, and the answers of the routes built here shaped as its models. The route groups'
 * own tests check their answers with the same `checkResponse`.
 */
const contract = agentServerContract;
let api: TestApi;
let sandboxId: string;
let conversationId: string;
let sessionApiKey: string;

/** A conversation in a running sandbox of a new user, as a start leaves them (ids in hex). */
const conversationInSandbox = async () => {
  const user = await api.newUser();
  const c = await createConversationFixture(api.database.db, { userId: user.userId });
  const sandbox = await sandboxesRepository(api.database.db).upsert({
    name: `tern-test-contract-${c.taskId}`,
    image: "tern-sandbox:latest",
    startTaskId: c.taskId,
    conversationId: c.conversationId,
    status: "RUNNING",
  });
  await api.database.db
    .updateTable("conversations")
    .set({ sandbox_id: sandbox.id })
    .where("id", "=", c.conversationId)
    .execute();
  return { sandboxId: toHexId(sandbox.id), conversationId: toHexId(c.conversationId), sessionApiKey: c.sessionApiKey };
};

beforeAll(async () => {
  api = await startTestApi();
  ({ sandboxId, conversationId, sessionApiKey } = await conversationInSandbox());
});

afterAll(async () => {
  const unseen = Object.keys(KNOWN_GAPS).filter((g) => !gapsSeen().has(g));
  if (unseen.length > 0) console.log(`KNOWN_GAPS no checked answer showed:\n  ${unseen.join("\n  ")}`);
  await api?.close();
});

/** The route's path with real ids: this sandbox's conversation, a fresh id for anything else. */
const concrete = (r: ContractRoute) =>
  `/agent/${sandboxId}${r.path.replace(/{(\w+)}/g, (_m, name: string) =>
    name === "conversation_id" ? conversationId : randomBytes(16).toString("hex"),
  )}`;

const request = (r: ContractRoute, headers: Record<string, string> = {}) =>
  fetch(`${api.url}${concrete(r)}`, { method: r.method === "WEBSOCKET" ? "GET" : r.method, headers });

const served = contract.routes.filter((r) => routeKey(r) in SERVED);

describe(`agent-server contract (openhands-agent-server ${contract.source.version}, ${contract.source.commit.slice(0, 12)})`, () => {
  it("names the source it was extracted from", () => {
    expect(contract.source.package).toBe("openhands-agent-server");
    expect(contract.source.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(contract.routes.length).toBeGreaterThan(40);
  });

  it("the checker sees a difference (its positive control)", () => {
    expect(differences("HealthStatus", { status: "ok" })).toEqual([]);
    expect(differences("HealthStatus", {})).toEqual(["HealthStatus.status: missing"]);
    expect(differences("Success", { success: "yes" })).toEqual(["Success.success: string, not bool"]);
    expect(() => checkResponse("ServerInfo", { uptime: 1 })).toThrow();
  });

  it("accounts for every route of the routers: served, or not served with a reason", () => {
    const keys = contract.routes.map(routeKey);
    const lists = { SERVED, NOT_SERVED };
    for (const key of keys) {
      const where = Object.entries(lists)
        .filter(([, list]) => key in list)
        .map(([name]) => name);
      expect(where, key).toHaveLength(1);
    }
    for (const [name, list] of Object.entries(lists)) {
      expect(
        Object.keys(list).filter((k) => !keys.includes(k)),
        `${name} names routes the contract does not have`,
      ).toEqual([]);
    }
  });

  it("serves each route it claims, with its method (the route table, and not 404/405 with a key)", async () => {
    const table = api.app.routes.map((r) => `${r.method} ${r.path}`);
    for (const r of served) {
      const path = `/agent/:sandbox_id${r.path.replace(/{(\w+)}/g, ":$1")}`;
      expect(table, routeKey(r)).toContain(`${r.method === "WEBSOCKET" ? "GET" : r.method} ${path}`);
      if (r.method === "WEBSOCKET") continue;
      const res = await request(r, { "x-session-api-key": sessionApiKey });
      // A fresh id of anything but the conversation is rightly unknown (404); the route table holds it.
      const unknownId = /{(?!conversation_id})\w+}/.test(r.path);
      expect(unknownId ? [405] : [404, 405], routeKey(r)).not.toContain(res.status);
    }
  });

  it("answers 401 without a key on every /api route (served or not), and the open routes without one", async () => {
    for (const r of contract.routes) {
      if (r.method === "WEBSOCKET") continue; // the socket's own auth: agent-server.test.ts (4001)
      const res = await request(r);
      if (r.auth) {
        expect(res.status, routeKey(r)).toBe(401);
        expect(await res.json(), routeKey(r)).toMatchObject({ detail: "Unauthorized" });
      } else {
        expect(r.status_codes, routeKey(r)).toContain(res.status);
      }
    }
  });

  it("the open routes answer as their models: HealthStatus, ServerInfo, /ready's dict[str, str]", async () => {
    const body = async (path: string) => {
      const res = await fetch(`${api.url}/agent/${sandboxId}${path}`);
      expect(res.status, path).toBe(200);
      return res.json();
    };
    checkResponse("HealthStatus", await body("/alive"));
    checkResponse("HealthStatus", await body("/health"));
    checkResponse("ServerInfo", await body("/server_info"));
    const ready = (await body("/ready")) as Record<string, unknown>;
    expect(Object.values(ready).every((v) => typeof v === "string")).toBe(true);
  });

  it("the conversation and event reads answer as their models: ConversationInfo, ConversationPage, EventPage, ...", async () => {
    // Its own conversation: the route table's check above DELETEs the shared one (and its key).
    const own = await conversationInSandbox();
    const call = async (method: string, path: string, json?: unknown) => {
      const res = await fetch(`${api.url}/agent/${own.sandboxId}${path}`, {
        method,
        headers: { "x-session-api-key": own.sessionApiKey, ...(json ? { "content-type": "application/json" } : {}) },
        ...(json ? { body: JSON.stringify(json) } : {}),
      });
      expect(res.status, `${method} ${path}: ${await res.clone().text()}`).toBe(200);
      return res.json();
    };
    const base = `/api/conversations/${own.conversationId}`;
    checkResponse("ConversationInfo", await call("GET", base));
    const page = (await call("GET", "/api/conversations/search")) as { items: unknown[] };
    checkResponse("ConversationPage", page);
    expect(page.items.length).toBeGreaterThan(0);
    expect(typeof (await call("GET", "/api/conversations/count"))).toBe("number");
    const batch = (await call("GET", `/api/conversations?ids=${own.conversationId}`)) as unknown[];
    for (const info of batch) checkResponse("ConversationInfo", info);
    checkResponse("Success", await call("PATCH", base, { title: "contract" }));
    checkResponse("AgentResponseResult", await call("GET", `${base}/agent_final_response`));
    checkResponse("EventPage", await call("GET", `${base}/events/search`));
    expect(typeof (await call("GET", `${base}/events/count`))).toBe("number");
    checkResponse("Success", await call("POST", `${base}/confirmation_policy`, { policy: { kind: "NeverConfirm" } }));
  });
});
