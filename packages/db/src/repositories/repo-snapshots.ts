import { newId, type RepositoryHook, type Skill } from "@tern/core";
import { type Kysely, type Selectable, sql } from "kysely";
import type { Database } from "../schema.ts";

/** What a snapshot is keyed by: a start with all of these the same may begin from it. */
export interface RepoSnapshotKey {
  userId: string;
  engineId: string;
  provider: string;
  repository: string;
  /** The branch asked for; "" for the repository's default branch. */
  branch: string;
  commit: string;
  baseImage: string;
}

/**
 * What the start that took a snapshot got from its hook and skill stages, for its commit and setup
 * script: a start from the snapshot uses them instead of running those stages' execs.
 */
export interface SnapshotStageResults {
  /** The hooks SETTING_UP_GIT_HOOKS installed (their files are in the snapshot's image). */
  hooks: RepositoryHook[];
  /** The skills SETTING_UP_SKILLS read. */
  skills: Skill[];
  /** MAX_SKILLS_BYTES they were read under: under another cap they are read again. */
  maxSkillsBytes: number;
}

export interface RepoSnapshot extends RepoSnapshotKey {
  id: string;
  setupHash: string;
  hasPreCommit: boolean;
  hasSkills: boolean;
  image: string;
  bytes: number;
  lastUsedAt: string;
  /** Null when not recorded (a row older than the column, or read by `listForUser`, which leaves them out). */
  stageResults: SnapshotStageResults | null;
}

export interface SnapshotBounds {
  /** Most snapshots kept (by last use), and most bytes, per user on one engine. */
  perUserCount: number;
  perUserBytes: number;
  /** The same over every user of one engine. */
  perEngineCount: number;
  perEngineBytes: number;
}

/** A row as read: its stage results only where the read asks for them. */
type Row = Omit<Selectable<Database["repo_snapshots"]>, "created_at" | "source_sandbox" | "stage_results"> & {
  stage_results?: unknown;
};

/** Written by this repository alone; anything of another shape reads as not recorded (the stages run). */
const stageResultsOf = (v: unknown): SnapshotStageResults | null => {
  if (typeof v !== "object" || v === null) return null;
  const r = v as Partial<SnapshotStageResults>;
  return Array.isArray(r.hooks) && Array.isArray(r.skills) && typeof r.maxSkillsBytes === "number"
    ? { hooks: r.hooks, skills: r.skills, maxSkillsBytes: r.maxSkillsBytes }
    : null;
};

const toSnapshot = (r: Row): RepoSnapshot => ({
  id: r.id,
  userId: r.user_id,
  engineId: r.engine_id,
  provider: r.provider,
  repository: r.repository,
  branch: r.branch,
  commit: r.commit,
  setupHash: r.setup_hash,
  hasPreCommit: r.has_pre_commit,
  hasSkills: r.has_skills,
  baseImage: r.base_image,
  image: r.image,
  bytes: Number(r.bytes),
  lastUsedAt: r.last_used_at,
  stageResults: stageResultsOf(r.stage_results),
});

/** The columns that name a repository's snapshots of one user, engine, branch and base image. */
const repositoryOf = (key: Omit<RepoSnapshotKey, "commit">) => ({
  user_id: key.userId,
  engine_id: key.engineId,
  provider: key.provider,
  repository: key.repository,
  branch: key.branch,
  base_image: key.baseImage,
});

export const repoSnapshotsRepository = (db: Kysely<Database>) => ({
  /**
   * Whether the user has any snapshot of this repository and branch from this base image on this
   * engine, whatever its commit: when not, a start need not ask the git host for the commit at all.
   */
  async anyFor(key: Omit<RepoSnapshotKey, "commit">): Promise<boolean> {
    const row = await db
      .selectFrom("repo_snapshots")
      .select("id")
      .where((eb) => eb.and(repositoryOf(key)))
      .where("image", "<>", "")
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  },

  /** The user's snapshot for exactly this key, marked used now; null when there is none. */
  async take(key: RepoSnapshotKey): Promise<RepoSnapshot | null> {
    const row = await db
      .updateTable("repo_snapshots")
      .set({ last_used_at: sql`now()` })
      .where(
        "id",
        "=",
        db
          .selectFrom("repo_snapshots")
          .select("id")
          .where((eb) => eb.and({ ...repositoryOf(key), commit: key.commit }))
          .where("image", "<>", "")
          .orderBy("last_used_at", "desc")
          .limit(1),
      )
      .returningAll()
      .executeTakeFirst();
    return row ? toSnapshot(row) : null;
  },

  /**
   * Records a snapshot about to be committed (its image not made yet: `take` never returns it), so
   * the image is made already owned: an image of ours without its row is the janitor's to remove.
   * A snapshot of the same key is replaced; its image is returned in `replaced`, the caller's to remove.
   */
  async begin(
    key: RepoSnapshotKey & { setupHash: string; hasPreCommit: boolean; hasSkills: boolean },
    /** The sandbox it is committed from: until `complete`, calls into it wait (`pendingFrom`). */
    sourceSandbox: string | null = null,
  ): Promise<{ id: string; replaced: string[] }> {
    const id = newId();
    return db.transaction().execute(async (trx) => {
      const old = await trx
        .deleteFrom("repo_snapshots")
        .where((eb) => eb.and({ ...repositoryOf(key), commit: key.commit, setup_hash: key.setupHash }))
        .returning("image")
        .execute();
      await trx
        .insertInto("repo_snapshots")
        .values({
          id,
          user_id: key.userId,
          engine_id: key.engineId,
          provider: key.provider,
          repository: key.repository,
          branch: key.branch,
          commit: key.commit,
          setup_hash: key.setupHash,
          has_pre_commit: key.hasPreCommit,
          has_skills: key.hasSkills,
          base_image: key.baseImage,
          image: "",
          bytes: 0,
          source_sandbox: sourceSandbox,
        })
        .execute();
      return { id, replaced: old.map((r) => r.image).filter((i) => i !== "") };
    });
  },

  /**
   * The image is made: the snapshot may serve, with what its start's hook and skill stages produced.
   * False when its row is gone (its user was removed, a newer snapshot of the key replaced it, or a
   * waiter abandoned it) or was completed already.
   */
  async complete(id: string, image: string, bytes: number, stageResults: SnapshotStageResults): Promise<boolean> {
    const r = await db
      .updateTable("repo_snapshots")
      .set({ image, bytes, stage_results: JSON.stringify(stageResults), last_used_at: sql`now()` })
      .where("id", "=", id)
      .where("image", "=", "")
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  },

  /**
   * Stage results for a snapshot completed without them (taken before they were kept): its next
   * starts run no hook or skill exec either. Never overwrites results already there.
   */
  async recordStageResults(id: string, stageResults: SnapshotStageResults): Promise<boolean> {
    const r = await db
      .updateTable("repo_snapshots")
      .set({ stage_results: JSON.stringify(stageResults) })
      .where("id", "=", id)
      .where("image", "<>", "")
      .where("stage_results", "is", null)
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  },

  /** Commits under way from this sandbox, with how long each has run (ms). */
  async pendingFrom(sourceSandbox: string): Promise<{ id: string; ageMs: number }[]> {
    const rows = await db
      .selectFrom("repo_snapshots")
      .select(["id", sql<number>`(extract(epoch from clock_timestamp() - created_at) * 1000)::float8`.as("age_ms")])
      .where("source_sandbox", "=", sourceSandbox)
      .where("image", "=", "")
      .execute();
    return rows.map((r) => ({ id: r.id, ageMs: Number(r.age_ms) }));
  },

  /**
   * A commit given up on (its worker is presumed dead): its row goes, so a `complete` coming later
   * fails and that worker removes its image. False when it completed first.
   */
  async abandon(id: string): Promise<boolean> {
    const r = await db.deleteFrom("repo_snapshots").where("id", "=", id).where("image", "=", "").executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  },

  /** Snapshots begun and never completed (their worker died): gone, so they count against no bound. */
  async removeStalePending(engineId: string, olderThanMs: number): Promise<number> {
    const r = await db
      .deleteFrom("repo_snapshots")
      .where("engine_id", "=", engineId)
      .where("image", "=", "")
      .where("created_at", "<", new Date(Date.now() - olderThanMs).toISOString())
      .executeTakeFirst();
    return Number(r.numDeletedRows);
  },

  /**
   * Deletes the snapshots past the bounds of this user and of the whole engine, least recently used
   * first, and returns them (their images are the caller's to remove).
   */
  async evictBeyond(userId: string, engineId: string, bounds: SnapshotBounds): Promise<RepoSnapshot[]> {
    const { rows } = await sql<Row>`
      with ranked as (
        select id,
          row_number() over (partition by user_id order by last_used_at desc, id) as user_n,
          sum(bytes) over (partition by user_id order by last_used_at desc, id) as user_bytes,
          row_number() over (order by last_used_at desc, id) as engine_n,
          sum(bytes) over (order by last_used_at desc, id) as engine_bytes,
          user_id
        from repo_snapshots where engine_id = ${engineId} and image <> ''
      )
      delete from repo_snapshots s using ranked r
      where s.id = r.id and (
        (r.user_id = ${userId} and (r.user_n > ${bounds.perUserCount} or r.user_bytes > ${bounds.perUserBytes}))
        or r.engine_n > ${bounds.perEngineCount} or r.engine_bytes > ${bounds.perEngineBytes}
      )
      returning s.*`.execute(db);
    return rows.map(toSnapshot);
  },

  /** The ids of the snapshots recorded on an engine: an image of ours not among them is removed. */
  async idsOnEngine(engineId: string): Promise<Set<string>> {
    const rows = await db.selectFrom("repo_snapshots").select("id").where("engine_id", "=", engineId).execute();
    return new Set(rows.map((r) => r.id));
  },

  async remove(id: string): Promise<void> {
    await db.deleteFrom("repo_snapshots").where("id", "=", id).execute();
  },

  /** The user's snapshots, last used first, without their stage results (`take` reads those of the one it takes). */
  async listForUser(userId: string): Promise<RepoSnapshot[]> {
    const rows = await db
      .selectFrom("repo_snapshots")
      .select([
        "id",
        "user_id",
        "engine_id",
        "provider",
        "repository",
        "branch",
        "commit",
        "setup_hash",
        "has_pre_commit",
        "has_skills",
        "base_image",
        "image",
        "bytes",
        "last_used_at",
      ])
      .where("user_id", "=", userId)
      .orderBy("last_used_at", "desc")
      .execute();
    return rows.map(toSnapshot);
  },
});

export type RepoSnapshotsRepository = ReturnType<typeof repoSnapshotsRepository>;
