import { randomBytes } from "node:crypto";
import { sdkSecretGraph, toHexId } from "@tern/core";
import { sandboxesRepository } from "@tern/db";
import { createConversationFixture } from "@tern/testing";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { agentServerContract } from "./agent-server-contract.ts";
import { type StreamTestApi, startStreamTestApi } from "./stream-harness.ts";

/**
 * Every field of an OpenHands StartConversationRequest that the SDK's models mark as a secret (the
 * committed contract's start_request section, not a list kept here), given a canary of its own on
 * every path that reaches it: the start is refused, or the canary is sealed at rest and never read
 * back through any answer, event or socket frame, nor found anywhere in the database in clear.
 */

interface FieldDesc {
  kind?: string;
  model?: string;
  secret?: "value" | "map";
  items?: FieldDesc;
  values?: FieldDesc;
  options?: FieldDesc[];
}
interface StartRequestSection {
  root: string;
  models: Record<string, { fields: Record<string, FieldDesc> }>;
  subclasses: Record<string, string[]>;
  secret_graph: unknown;
  secret_fields: string[];
}
const section = (agentServerContract as unknown as { start_request: StartRequestSection }).start_request;

/** One step from a model to a value inside it. */
type Step = { field: string } | { kind: string } | { item: true } | { entry: true };

/** The models a reference leads to (through lists, maps and unions). */
const modelsOf = (d: FieldDesc | undefined): { model: string; via: Step[] }[] => {
  if (!d) return [];
  const out: { model: string; via: Step[] }[] = [];
  if (d.model) out.push({ model: d.model, via: [] });
  for (const m of modelsOf(d.items)) out.push({ model: m.model, via: [{ item: true }, ...m.via] });
  for (const m of modelsOf(d.values)) out.push({ model: m.model, via: [{ entry: true }, ...m.via] });
  for (const o of d.options ?? []) out.push(...modelsOf(o));
  return out;
};

/** The concrete models an object of `model` may be, with the `kind` that names each. */
const concrete = (model: string): string[] => {
  const subs = section.subclasses[model] ?? [];
  return subs.length ? subs.filter((s) => !(section.subclasses[s] ?? []).length) : [model];
};

/** Every path from the request to each secret field, no model twice on one path (so each place a model is used). */
const secretPaths = (): { label: string; steps: Step[]; secret: "value" | "map" }[] => {
  const out: { label: string; steps: Step[]; secret: "value" | "map" }[] = [];
  const visit = (model: string, steps: Step[], seen: string[], label: string) => {
    for (const [field, d] of Object.entries(section.models[model]?.fields ?? {})) {
      const here = [...steps, { field }];
      if (d.secret) out.push({ label: `${label}.${field}`, steps: here, secret: d.secret });
      for (const ref of modelsOf(d)) {
        for (const m of concrete(ref.model)) {
          if (seen.includes(m)) continue;
          const kindStep = m !== ref.model || section.subclasses[ref.model] ? [{ kind: m }] : [];
          visit(
            m,
            [...here, ...ref.via, ...kindStep],
            [...seen, m],
            `${label}.${field}${ref.via.length ? "[]" : ""}(${m})`,
          );
        }
      }
    }
  };
  visit(section.root, [], [section.root], section.root);
  return out;
};

/** `base` with the value at the end of `steps` set (objects, one-item lists and one-key maps made on the way). */
const placed = (base: Record<string, unknown>, steps: Step[], leaf: unknown): Record<string, unknown> => {
  const at = (node: unknown, i: number): unknown => {
    if (i === steps.length) return leaf;
    const step = steps[i]!;
    if ("kind" in step) return { ...(at(node, i + 1) as object), kind: step.kind };
    if ("item" in step) return [at(undefined, i + 1)];
    if ("entry" in step) return { canary: at(undefined, i + 1) };
    const obj = (node ?? filler(steps[i - 1], step.field)) as Record<string, unknown>;
    return { ...obj, [step.field]: at(obj[step.field], i + 1) };
  };
  return at(base, 0) as Record<string, unknown>;
};

/**
 * What an object needs beside the secret for tern to take it: an MCP server is a remote one (a
 * URL) or a stdio one (a command), as the env or headers it holds says.
 */
const filler = (previous: Step | undefined, field: string): Record<string, unknown> =>
  previous && "entry" in previous
    ? field === "env"
      ? { command: "npx" }
      : { url: "https://mcp.example.com/mcp" }
    : {};

const startBase = () => ({
  agent: { kind: "Agent", llm: { model: "gpt-client" }, tools: [] },
  workspace: { kind: "LocalWorkspace", working_dir: "/workspace" },
});

let t: StreamTestApi;
let owner: { key: string; userId: string };
let sandboxId: string;

beforeAll(async () => {
  // The operator's LLM takes any model: a start without a key of its own is not refused for that.
  t = await startStreamTestApi({ LLM_PROVIDER: "openai", LLM_MODELS: "*" });
  owner = await t.api.newUser();
  const db = t.api.database.db;
  const c = await createConversationFixture(db, { userId: owner.userId });
  const sandbox = await sandboxesRepository(db).upsert({
    name: `tern-test-secrets-${c.taskId}`,
    image: "tern-sandbox:latest",
    startTaskId: c.taskId,
    conversationId: c.conversationId,
    status: "RUNNING",
  });
  await db.updateTable("conversations").set({ sandbox_id: sandbox.id }).where("id", "=", c.conversationId).execute();
  sandboxId = toHexId(sandbox.id);
}, 120_000);
afterAll(() => t?.close());

const agentCall = async (method: string, path: string, json?: unknown) => {
  const res = await fetch(`${t.url()}/agent/${sandboxId}${path}`, {
    method,
    headers: { "x-session-api-key": owner.key, ...(json !== undefined ? { "content-type": "application/json" } : {}) },
    ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
  });
  return { status: res.status, text: await res.text() };
};

/** The first frame the events socket sends (the conversation's full state). */
const socketState = (conversationId: string) =>
  new Promise<string>((resolve, reject) => {
    const ws = new WebSocket(`${t.url().replace("http", "ws")}/agent/${sandboxId}/sockets/events/${conversationId}`, {
      headers: { "x-session-api-key": owner.key },
    });
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new Error("no frame from the events socket"));
    }, 20_000);
    ws.once("message", (data) => {
      clearTimeout(timer);
      ws.close();
      resolve(String(data));
    });
    ws.once("error", reject);
  });

describe("client secrets of a StartConversationRequest", () => {
  it("the generated graph tern masks by is the committed contract's", () => {
    expect(sdkSecretGraph).toEqual(section.secret_graph);
    // Its positive control: the contract marks the secrets this test is about.
    expect(section.secret_fields).toEqual(
      expect.arrayContaining([
        "LLM.api_key (value: secret)",
        "LLM.aws_secret_access_key (value: secret)",
        "LLM.extra_headers (map: header map)",
        "MCPServer.headers (map: header map)",
        "MCPServer.env (map: secret)",
      ]),
    );
  });

  it("each is refused or sealed at rest, and masked in every answer, event and socket frame", async () => {
    const paths = secretPaths();
    // Every secret field of the contract is on some path from the request.
    const fieldsReached = new Set(paths.map((p) => p.label.replace(/^.*\(([^)]+)\)\.(\w+)$/, "$1.$2")));
    for (const f of section.secret_fields) {
      const name = f.split(" ")[0]!;
      if (!name.startsWith(`${section.root}.`)) expect(fieldsReached, name).toContain(name);
    }

    const canaries: string[] = [];
    const outcomes: Record<string, number> = {};
    for (const p of paths) {
      const canary = `canary-${randomBytes(8).toString("hex")}`;
      canaries.push(canary);
      const leaf = p.secret === "map" ? { CANARY_X: canary } : canary;
      const body = placed(startBase(), p.steps, leaf);
      expect(JSON.stringify(body), p.label).toContain(canary);
      const started = await agentCall("POST", "/api/conversations", body);
      outcomes[p.label] = started.status;
      expect([201, 422], `${p.label}: ${started.text}`).toContain(started.status);
      expect(started.text, p.label).not.toContain(canary);
      if (started.status !== 201) continue;

      const id = (JSON.parse(started.text) as { id: string }).id.replace(/-/g, "");
      const answers = [
        await agentCall("GET", `/api/conversations/${id}`),
        await agentCall("GET", `/api/conversations?ids=${id}`),
        await agentCall("GET", "/api/conversations/search?limit=100"),
        await agentCall("GET", `/api/conversations/${id}/events/search`),
        await agentCall("PATCH", `/api/conversations/${id}`, { title: "secrets" }),
      ];
      for (const a of answers) {
        expect(a.status, `${p.label}: ${a.text}`).toBe(200);
        expect(a.text, p.label).not.toContain(canary);
      }
      const frame = await socketState(id);
      expect(frame, p.label).toContain("full_state");
      expect(frame, p.label).not.toContain(canary);
      // The positive controls: the field is read back masked, and what was sealed opens to the canary.
      const uuid = id.replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, "$1-$2-$3-$4-$5");
      if (p.label.startsWith(`${section.root}.agent`)) {
        expect(answers[0]!.text, p.label).toContain("**********");
        const row = await t.api.database.db
          .selectFrom("agent_server_conversations")
          .select("agent_sealed")
          .where("conversation_id", "=", uuid)
          .executeTakeFirstOrThrow();
        expect(t.api.secretBox.open(row.agent_sealed ?? "", `agent-server:${uuid}:agent`), p.label).toContain(canary);
      } else {
        const row = await t.api.database.db
          .selectFrom("agent_server_conversation_secrets")
          .select("secrets_sealed")
          .where("conversation_id", "=", uuid)
          .executeTakeFirstOrThrow();
        expect(t.api.secretBox.open(row.secrets_sealed, `agent-server:${uuid}:secrets`), p.label).toContain(canary);
      }
    }
    // Some paths started a conversation (else nothing was read back).
    expect(Object.values(outcomes).filter((s) => s === 201).length).toBeGreaterThan(10);

    // At rest: no table holds any canary in clear.
    const tables = await sql<{ table_name: string }>`
      select table_name from information_schema.tables where table_schema = current_schema() and table_type = 'BASE TABLE'
    `.execute(t.api.database.db);
    const found: string[] = [];
    for (const { table_name } of tables.rows) {
      const rows = await sql<{ row: string }>`select t::text as row from ${sql.table(table_name)} t`.execute(
        t.api.database.db,
      );
      for (const { row } of rows.rows) for (const c of canaries) if (row.includes(c)) found.push(`${table_name}: ${c}`);
    }
    expect(found).toEqual([]);
  }, 300_000);
});
