import { type GitProvider, newId } from "@tern/core";
import { type Kysely, type Selectable, sql } from "kysely";
import type { Database, GitProvidersTable } from "../schema.ts";

/** A user's git account as stored: the token stays sealed here, opened only where a clone or push needs it. */
export interface StoredGitProvider {
  id: string;
  userId: string;
  provider: GitProvider;
  host: string | null;
  tokenSealed: string;
  createdAt: string;
  updatedAt: string;
}

const toProvider = (r: Selectable<GitProvidersTable>): StoredGitProvider => ({
  id: r.id,
  userId: r.user_id,
  provider: r.provider as GitProvider,
  host: r.host,
  tokenSealed: r.token_sealed,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

/** What a sealed token is bound to: a value copied to another user or provider does not open. */
export const gitProviderSealContext = (userId: string, provider: GitProvider): string =>
  `git-provider:${userId}:${provider}`;

export const gitProvidersRepository = (db: Kysely<Database>) => ({
  /** One account per user and provider: a second one replaces the first (a new token, or a new host). */
  async upsert(input: { userId: string; provider: GitProvider; host: string | null; tokenSealed: string }) {
    const row = await db
      .insertInto("git_providers")
      .values({
        id: newId(),
        user_id: input.userId,
        provider: input.provider,
        host: input.host,
        token_sealed: input.tokenSealed,
      })
      .onConflict((oc) =>
        oc.columns(["user_id", "provider"]).doUpdateSet({
          host: input.host,
          token_sealed: input.tokenSealed,
          updated_at: sql<string>`clock_timestamp()`,
        }),
      )
      .returningAll()
      .executeTakeFirstOrThrow();
    return toProvider(row);
  },

  async listForUser(userId: string): Promise<StoredGitProvider[]> {
    const rows = await db
      .selectFrom("git_providers")
      .selectAll()
      .where("user_id", "=", userId)
      .orderBy("provider")
      .execute();
    return rows.map(toProvider);
  },

  async findForUser(userId: string, provider: GitProvider): Promise<StoredGitProvider | null> {
    const row = await db
      .selectFrom("git_providers")
      .selectAll()
      .where("user_id", "=", userId)
      .where("provider", "=", provider)
      .executeTakeFirst();
    return row ? toProvider(row) : null;
  },

  /** True when the user had it; another user's id deletes nothing. */
  async delete(userId: string, id: string): Promise<boolean> {
    const res = await db
      .deleteFrom("git_providers")
      .where("user_id", "=", userId)
      .where("id", "=", id)
      .executeTakeFirst();
    return Number(res.numDeletedRows) > 0;
  },

  /** Every sealed token, for a key rotation: `reseal` returns the value sealed under the new key. */
  async resealAll(reseal: (sealed: string, context: string) => string): Promise<number> {
    const rows = await db.selectFrom("git_providers").select(["id", "user_id", "provider", "token_sealed"]).execute();
    for (const r of rows) {
      const next = reseal(r.token_sealed, gitProviderSealContext(r.user_id, r.provider as GitProvider));
      await db.updateTable("git_providers").set({ token_sealed: next }).where("id", "=", r.id).execute();
    }
    return rows.length;
  },
});

export const pullRequestsRepository = (db: Kysely<Database>) => ({
  /** Idempotent per conversation, repository and number (a tool call run twice records one row). */
  async record(input: {
    conversationId: string;
    provider: GitProvider;
    repository: string;
    number: number;
    url: string;
    head: string;
    base: string;
  }): Promise<void> {
    await db
      .insertInto("pull_requests")
      .values({
        id: newId(),
        conversation_id: input.conversationId,
        provider: input.provider,
        repository: input.repository,
        number: input.number,
        url: input.url,
        head: input.head,
        base: input.base,
      })
      .onConflict((oc) => oc.columns(["conversation_id", "repository", "number"]).doNothing())
      .execute();
    // The conversation record's `pr_number` (OpenHands' list of ints), kept equal to this table's numbers.
    await sql`update conversations set pr_number = coalesce(
        (select jsonb_agg(p.number order by p.created_at, p.id) from pull_requests p where p.conversation_id = ${input.conversationId}),
        '[]'::jsonb)
      where id = ${input.conversationId}`.execute(db);
  },

  /** The numbers of a conversation's pull requests, oldest first: its `pr_number`. */
  async numbersOf(conversationId: string): Promise<number[]> {
    const rows = await db
      .selectFrom("pull_requests")
      .select("number")
      .where("conversation_id", "=", conversationId)
      .orderBy("created_at")
      .orderBy("id")
      .execute();
    return rows.map((r) => r.number);
  },
});
