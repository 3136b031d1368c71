import {
  type AgentType,
  type Conversation,
  type ConversationMetrics,
  type ConversationTrigger,
  type ExecutionStatus,
  type GitProvider,
  hashApiKey,
  parseId,
  type RepositoryHook,
  type SandboxStatus,
  type Skill,
  type StoredSessionApiKey,
} from "@tern/core";
import { type Kysely, type Selectable, sql } from "kysely";
import type { ConversationsTable, Database } from "../schema.ts";
import { type FirstEvents, openConversationRows } from "./conversation-opening.ts";
import { emptyMetrics, metricsChange } from "./metrics.ts";
import { createReadCoalescer, type ReadCoalescer } from "./read-coalescer.ts";

type Row = Selectable<ConversationsTable> & { sandbox_status: string | null; sub_conversation_ids: string[] | null };

export const conversationSortOrders = [
  "CREATED_AT",
  "CREATED_AT_DESC",
  "UPDATED_AT",
  "UPDATED_AT_DESC",
  "TITLE",
  "TITLE_DESC",
] as const;
export type ConversationSortOrder = (typeof conversationSortOrders)[number];

/** The search's and the count's filters (OpenHands' app-conversation search parameters). */
export interface ConversationFilter {
  titleContains?: string;
  /** ISO 8601 with zone. */
  createdAtGte?: string;
  createdAtLt?: string;
  updatedAtGte?: string;
  updatedAtLt?: string;
  sandboxId?: string;
  /** This conversation only (what a conversation's own key lists on its agent server). */
  conversationId?: string;
  /** Conversations started with a parent are left out unless asked for (as OpenHands does). */
  includeSubConversations?: boolean;
  /** Only conversations in this execution status (the agent server's `status`). */
  executionStatus?: ExecutionStatus;
}

/** A listing's keyset position: the sort key (as text) and id of the last item seen. */
export interface SortPosition {
  key: string;
  id: string;
}

/** The value a conversation sorts by under `order`, as the keyset cursor keeps it. */
export const conversationSortKey = (c: Conversation, order: ConversationSortOrder): string =>
  order.startsWith("TITLE") ? (c.title ?? "") : order.startsWith("UPDATED_AT") ? c.updatedAt : c.createdAt;

/** `%` and `_` of a user's text matched literally by LIKE. */
export const likeEscaped = (text: string): string => text.replace(/[\\%_]/g, (ch) => `\\${ch}`);

const toConversation = (r: Row): Conversation => ({
  id: r.id,
  userId: r.user_id,
  startTaskId: r.start_task_id,
  title: r.title,
  sandboxId: r.sandbox_id,
  sandboxStatus: (r.sandbox_status ?? "MISSING") as SandboxStatus,
  executionStatus: r.execution_status as ExecutionStatus,
  sealedSessionApiKey: r.session_api_key_sealed,
  selectedRepository: r.selected_repository,
  selectedBranch: r.selected_branch,
  gitProvider: r.git_provider as GitProvider | null,
  llmModel: r.llm_model,
  trigger: r.trigger as ConversationTrigger | null,
  prNumber: r.pr_number ?? [],
  parentConversationId: r.parent_conversation_id,
  subConversationIds: r.sub_conversation_ids ?? [],
  public: r.public,
  agentType: (r.agent_type ?? "default") as AgentType,
  metrics: { ...emptyMetrics, ...r.metrics },
  skills: r.skills as Skill[],
  hooks: r.hooks as RepositoryHook[],
  workspaceDir: r.workspace_dir,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

export interface NewConversation {
  id: string;
  userId: string;
  startTaskId: string;
  title: string | null;
  sandboxId: string | null;
  /** issueSessionApiKey's stored form: the key itself is never stored. */
  sessionApiKey: StoredSessionApiKey;
  selectedRepository: string | null;
  selectedBranch: string | null;
  gitProvider: GitProvider | null;
  llmModel: string | null;
  skills: Skill[];
  /** What SETTING_UP_GIT_HOOKS installed; none when not given. */
  hooks?: RepositoryHook[];
  workspaceDir: string;
  trigger?: ConversationTrigger | null;
  prNumber?: number[];
  parentConversationId?: string | null;
  public?: boolean | null;
  agentType?: AgentType;
}

/** What PATCH may change; a field left undefined is kept. */
export interface ConversationUpdate {
  title?: string;
  public?: boolean | null;
  selectedRepository?: string | null;
  selectedBranch?: string | null;
  gitProvider?: GitProvider | null;
}

// sandbox_status is read from the sandbox row (DESIGN: the conversation's status follows it).
const selectConversations = (db: Kysely<Database>) =>
  db
    .selectFrom("conversations")
    .leftJoin("sandboxes", "sandboxes.id", "conversations.sandbox_id")
    .selectAll("conversations")
    .select("sandboxes.status as sandbox_status")
    // conversations_parent_idx
    .select(
      sql<
        string[] | null
      >`(select array_agg(s.id::text order by s.created_at, s.id) from conversations s where s.parent_conversation_id = conversations.id)`.as(
        "sub_conversation_ids",
      ),
    );

const readers = new WeakMap<Kysely<Database>, ReadCoalescer<Conversation>>();

/**
 * The process's coalesced reads by id on this database handle (read-coalescer.ts): one per pool, so
 * the reads of every request in flight share a statement. It loads the rows of all their ids
 * (conversations_pkey) as one prepared statement whatever their number, and gives each caller
 * its own user's.
 */
export const conversationReaderOf = (db: Kysely<Database>): ReadCoalescer<Conversation> => {
  let r = readers.get(db);
  if (!r) {
    // Built and compiled once: each batch only binds its ids to it.
    const statement = selectConversations(db).where("conversations.id", "=", sql<string>`any(${[]}::uuid[])`).compile();
    r = createReadCoalescer({
      load: async (ids) => (await db.executeQuery<Row>({ ...statement, parameters: [ids] })).rows.map(toConversation),
      keyOf: (c) => c.id,
      ownerOf: (c) => c.userId,
    });
    readers.set(db, r);
  }
  return r;
};

export const conversationsRepository = (db: Kysely<Database>) => {
  const base = () => selectConversations(db);

  const filtered = (userId: string, f: ConversationFilter) => {
    let q = base().where("conversations.user_id", "=", userId);
    if (f.conversationId !== undefined) q = q.where("conversations.id", "=", f.conversationId);
    if (!f.includeSubConversations) q = q.where("conversations.parent_conversation_id", "is", null);
    if (f.titleContains !== undefined && f.titleContains !== "")
      q = q.where(sql<boolean>`conversations.title ilike ${`%${likeEscaped(f.titleContains)}%`}`);
    if (f.createdAtGte !== undefined)
      q = q.where("conversations.created_at", ">=", sql<string>`${f.createdAtGte}::timestamptz`);
    if (f.createdAtLt !== undefined)
      q = q.where("conversations.created_at", "<", sql<string>`${f.createdAtLt}::timestamptz`);
    if (f.updatedAtGte !== undefined)
      q = q.where("conversations.updated_at", ">=", sql<string>`${f.updatedAtGte}::timestamptz`);
    if (f.updatedAtLt !== undefined)
      q = q.where("conversations.updated_at", "<", sql<string>`${f.updatedAtLt}::timestamptz`);
    if (f.sandboxId !== undefined) q = q.where("conversations.sandbox_id", "=", f.sandboxId);
    if (f.executionStatus !== undefined) q = q.where("conversations.execution_status", "=", f.executionStatus);
    return q;
  };

  return {
    /** Idempotent per start task: a second call returns the conversation the first one made. */
    /**
     * Opens the conversation of a start task (tern_open_conversation, the one definition the
     * API's warm claim uses too): its row, or the one an earlier attempt made (moved to this
     * sandbox), and with `first` its first events and their webhook deliveries.
     */
    async createForTask(input: NewConversation, first: FirstEvents | null = null): Promise<Conversation> {
      const { conversationId } = await openConversationRows(db, input, first);
      const row = await base().where("conversations.id", "=", conversationId).executeTakeFirstOrThrow();
      return toConversation(row);
    },

    async get(id: string): Promise<Conversation | null> {
      const row = await base().where("conversations.id", "=", id).executeTakeFirst();
      return row ? toConversation(row) : null;
    },

    async findByTask(startTaskId: string): Promise<Conversation | null> {
      const row = await base().where("conversations.start_task_id", "=", startTaskId).executeTakeFirst();
      return row ? toConversation(row) : null;
    },

    /**
     * The user's conversations among `ids`; the others, and malformed ids, are left out. Outside a
     * transaction through the process's read coalescing (conversationReaderOf): a read asked for after a commit
     * sees it.
     */
    async findForUser(userId: string, ids: string[]): Promise<Conversation[]> {
      if (ids.length === 0) return [];
      // Canonical (the rows' own spelling, which the coalescer matches them by); a malformed id
      // matches nothing, and must not fail the statement of the reads coalesced with it.
      if (!db.isTransaction)
        return conversationReaderOf(db).read(
          userId,
          ids.map(parseId).filter((id) => id !== null),
        );
      const rows = await base()
        .where("conversations.user_id", "=", userId)
        .where("conversations.id", "in", ids)
        .execute();
      return rows.map(toConversation);
    },

    /**
     * The caller's conversations matching `filter`, in `order`, keyset-paged after the (sort key,
     * id) of the last one seen (conversations_user_created_idx / _updated_idx; a title order sorts
     * the user's rows). Returns up to `limit` + 1 rows so the caller knows if more follow.
     */
    async searchForUser(
      userId: string,
      opts: {
        limit: number;
        filter?: ConversationFilter;
        order?: ConversationSortOrder;
        after?: SortPosition | null;
      },
    ): Promise<Conversation[]> {
      const order = opts.order ?? "CREATED_AT_DESC";
      const dir = order.endsWith("_DESC") ? "desc" : "asc";
      const keyExpr = order.startsWith("TITLE")
        ? sql`coalesce(conversations.title, '') collate "C"`
        : order.startsWith("UPDATED_AT")
          ? sql`conversations.updated_at`
          : sql`conversations.created_at`;
      // Titles compare byte-wise (collate "C"): the same order in every database, and in the cursor.
      const keyCast = order.startsWith("TITLE") ? sql`::text collate "C"` : sql`::timestamptz`;
      let q = filtered(userId, opts.filter ?? {});
      if (opts.after) {
        const op = sql.raw(dir === "desc" ? "<" : ">");
        q = q.where(
          sql<boolean>`(${keyExpr}, conversations.id) ${op} (${opts.after.key}${keyCast}, ${opts.after.id}::uuid)`,
        );
      }
      const rows = await q
        .orderBy(sql`${keyExpr}`, dir)
        .orderBy("conversations.id", dir)
        .limit(opts.limit + 1)
        .execute();
      return rows.map(toConversation);
    },

    /** How many of the caller's conversations match `filter` (the search's total). */
    async countForUser(userId: string, filter: ConversationFilter = {}): Promise<number> {
      const rows = await filtered(userId, filter)
        .clearSelect()
        .select((eb) => eb.fn.countAll<string>().as("n"))
        .executeTakeFirstOrThrow();
      return Number(rows.n);
    },

    /** Changes the fields given; returns false when there is no such conversation. */
    async update(id: string, change: ConversationUpdate): Promise<boolean> {
      const set: Record<string, unknown> = {};
      if (change.title !== undefined) set.title = change.title;
      if (change.public !== undefined) set.public = change.public;
      if (change.selectedRepository !== undefined) set.selected_repository = change.selectedRepository;
      if (change.selectedBranch !== undefined) set.selected_branch = change.selectedBranch;
      if (change.gitProvider !== undefined) set.git_provider = change.gitProvider;
      const res = await db
        .updateTable("conversations")
        .set({ ...set, updated_at: sql<string>`clock_timestamp()` })
        .where("id", "=", id)
        .executeTakeFirst();
      return res.numUpdatedRows > 0n;
    },

    /** The conversation a live (not revoked) session key belongs to, by the key's hash (unique index). */
    /** Whether a conversation has this id, or a start task in flight or done asked for it. */
    async idInUse(id: string): Promise<boolean> {
      const taken = await db
        .selectNoFrom((eb) => [
          eb.exists(eb.selectFrom("conversations").select("id").where("id", "=", id)).as("conversation"),
          eb
            .exists(
              eb
                .selectFrom("start_tasks")
                .select("id")
                .where("status", "!=", "ERROR")
                .where((w) => w(w.ref("request", "->>").key("conversation_id"), "=", id)),
            )
            .as("task"),
        ])
        .executeTakeFirstOrThrow();
      return Boolean(taken.conversation || taken.task);
    },

    /** The conversation, while its keys stand (not revoked by its deletion); null otherwise. */
    async findWithLiveKeys(id: string): Promise<Conversation | null> {
      const row = await base()
        .where("conversations.id", "=", id)
        .where("conversations.session_revoked_at", "is", null)
        .executeTakeFirst();
      return row ? toConversation(row) : null;
    },

    async findBySessionKey(sessionApiKey: string): Promise<Conversation | null> {
      const row = await base()
        .where("conversations.session_api_key_hash", "=", hashApiKey(sessionApiKey))
        .where("conversations.session_revoked_at", "is", null)
        .executeTakeFirst();
      return row ? toConversation(row) : null;
    },

    /** Revokes the conversation's session key (on DELETE): nothing of it that could be shown is kept. Idempotent. */
    async revokeSessionKey(id: string): Promise<void> {
      await db
        .updateTable("conversations")
        .set({
          session_revoked_at: sql<string>`coalesce(session_revoked_at, now())`,
          session_api_key: null,
          session_api_key_sealed: null,
        })
        .where("id", "=", id)
        .execute();
    },

    /**
     * Seals the plaintext session keys of conversations made before migration 0090 (run at api
     * start; SQL cannot seal, as SECRETS_KEY never reaches the database). Safe to run on every
     * replica at once: a row is sealed only while it still holds the plaintext read.
     */
    async sealPlaintextSessionKeys(seal: (conversationId: string, key: string) => string): Promise<number> {
      let sealed = 0;
      for (;;) {
        const rows = await db
          .selectFrom("conversations")
          .select(["id", "session_api_key"])
          .where("session_api_key", "is not", null)
          .limit(500)
          .execute();
        if (rows.length === 0) return sealed;
        for (const r of rows) {
          const key = r.session_api_key as string;
          const res = await db
            .updateTable("conversations")
            .set({
              session_api_key_sealed: seal(r.id, key),
              session_api_key_hash: hashApiKey(key),
              session_api_key: null,
            })
            .where("id", "=", r.id)
            .where("session_api_key", "=", key)
            .executeTakeFirst();
          sealed += Number(res.numUpdatedRows);
        }
      }
    },

    async setExecutionStatus(id: string, status: ExecutionStatus): Promise<void> {
      await db
        .updateTable("conversations")
        .set({ execution_status: status, updated_at: sql<string>`clock_timestamp()` })
        .where("id", "=", id)
        .execute();
    },

    async setSandbox(id: string, sandboxId: string | null): Promise<void> {
      await db
        .updateTable("conversations")
        .set({ sandbox_id: sandboxId, updated_at: sql<string>`clock_timestamp()` })
        .where("id", "=", id)
        .execute();
    },

    /**
     * Adds to the usage counters atomically (several runs never lose each other's counts), and sets
     * the values of `set` (e.g. the last call's tokens, the budget). Returns the counters after it.
     */
    async addMetrics(
      id: string,
      delta: Partial<ConversationMetrics>,
      set: Partial<ConversationMetrics> = {},
    ): Promise<ConversationMetrics | null> {
      const row = await db
        .updateTable("conversations")
        .set({ metrics: metricsChange({ add: delta, set }), updated_at: sql<string>`clock_timestamp()` })
        .where("id", "=", id)
        .returning("metrics")
        .executeTakeFirst();
      return row ? { ...emptyMetrics, ...row.metrics } : null;
    },
  };
};

export type ConversationsRepository = ReturnType<typeof conversationsRepository>;
