import { sql } from "kysely";
import type { Migrator } from "kysely/migration";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DbHandle } from "../src/connection.ts";
import { createStepwiseDatabase } from "./stepwise-database.ts";

let db: Awaited<ReturnType<typeof createStepwiseDatabase>>;
let handle: DbHandle;
let migrator: Migrator;

beforeAll(async () => {
  db = await createStepwiseDatabase();
  ({ handle, migrator } = db);
});

afterAll(async () => {
  await db?.close();
});

describe("migration 20261205_0510_sealed_client_agent", () => {
  it("masks the secrets an agent-server row kept in clear before it", async () => {
    expect((await migrator.migrateTo("20261205_0500_snapshot_stage_results")).error).toBeUndefined();
    const user = "00000000-0000-4000-8000-0000000000a1";
    const conversation = "00000000-0000-4000-8000-0000000000c1";
    await sql`insert into users (id) values (${user})`.execute(handle.db);
    await sql`insert into conversations (id, user_id, workspace_dir) values (${conversation}, ${user}, '/workspace')`.execute(
      handle.db,
    );
    const agent = {
      kind: "Agent",
      llm: { model: "m", aws_secret_access_key: "canary-aws", extra_headers: { "X-Key": "canary-header" } },
      condenser: { kind: "LLMSummarizingCondenser", llm: { model: "m", api_key: "canary-condenser" } },
      tools: [],
    };
    await sql`insert into agent_server_conversations
                (conversation_id, llm_model, tools, max_iterations, working_dir, agent)
              values (${conversation}, 'm', '[]', 10, '/workspace', ${JSON.stringify(agent)}::jsonb)`.execute(
      handle.db,
    );

    expect((await migrator.migrateToLatest()).error).toBeUndefined();
    const row = await sql<{ agent: Record<string, unknown> }>`
      select agent from agent_server_conversations where conversation_id = ${conversation}`.execute(handle.db);
    const text = JSON.stringify(row.rows[0]?.agent);
    expect(text).not.toMatch(/canary-/);
    // What is not a secret is kept as it was.
    expect(row.rows[0]?.agent).toMatchObject({
      kind: "Agent",
      llm: { model: "m", aws_secret_access_key: "**********" },
    });
  });
});
