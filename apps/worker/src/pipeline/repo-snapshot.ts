import { checkedFetch, type StartRequest } from "@tern/core";
import { type RepoSnapshot, type RepoSnapshotKey, repoSnapshotsRepository, type SnapshotStageResults } from "@tern/db";
import { ImageLabel, SandboxLabel } from "@tern/sandbox";
import type { WorkerDeps } from "../deps.ts";
import { type ResolvedAccess, resolveGitAccess } from "../git/git-access.ts";
import type { AcquiredSandbox, StartContext, Workspace } from "./context.ts";
import { lookUpRef } from "./ref-lookup.ts";
import { repositorySpecOf } from "./repository-spec.ts";

const REF_LOOKUP_TIMEOUT_MS = 30_000;
/** A ref lookup's answer: ls-refs names one ref; a v0 advertisement lists them all. */
const REF_LOOKUP_MAX_BYTES = 8 * 1024 * 1024;

/** What a start with a repository knows of snapshots before its sandbox exists. */
export interface SnapshotPlan {
  /** The key a snapshot made by this start is recorded under (its commit: what the clone checked out; "" until known). */
  key: RepoSnapshotKey;
  /** The snapshot this start begins from; null: clone and run the setup script. */
  hit: RepoSnapshot | null;
  /** The git access the ref lookup used: the clone uses it again. */
  access: ResolvedAccess;
}

const snapshotsEnabled = (deps: WorkerDeps): deps is WorkerDeps & { engineId: string } =>
  deps.config.REPO_SNAPSHOTS &&
  deps.engineId !== null &&
  typeof deps.sandboxes.commit === "function" &&
  typeof deps.sandboxes.removeImage === "function";

/**
 * The commit a branch (or the default branch) is at, asked of the host with the clone's access, from
 * the worker's own process (ref-lookup.ts): null when it cannot say. The host is reached as every URL a
 * user may name is: the deployment's own git host may be private; a user's own only where
 * GIT_ALLOW_PRIVATE_HOSTS says so, as the clone's check of it (git-access.ts).
 */
const commitOfBranch = (deps: WorkerDeps, access: ResolvedAccess, branch: string | null): Promise<string | null> =>
  lookUpRef(access, branch ? `refs/heads/${branch}` : "HEAD", {
    fetch: checkedFetch({
      policy: { allowPrivate: !access.userHost || deps.config.GIT_ALLOW_PRIVATE_HOSTS, allowHttp: access.allowHttp },
      settings: "GIT",
      maxResponseBytes: REF_LOOKUP_MAX_BYTES,
    }),
    timeoutMs: REF_LOOKUP_TIMEOUT_MS,
  });

/** What a start knows of snapshots from the database alone, before it asks the host for the commit. */
interface SnapshotDraft {
  key: RepoSnapshotKey;
  access: ResolvedAccess;
  /** Only a plan without a snapshot can come of it (`fresh`, or the user has none of this repository). */
  noHit: boolean;
  /** The user's snapshot of this repository used last: most likely of the commit the host names. */
  likely: RepoSnapshot | null;
}

/**
 * Before the sandbox: whether this start may begin from a snapshot of the same user's, from the
 * database alone. A start that asked for `fresh` never takes one. Null when snapshots do not apply
 * (no repository, switched off, a driver without images).
 */
const draftSnapshot = async (ctx: StartContext): Promise<SnapshotDraft | null> => {
  const { deps, task } = ctx;
  if (!snapshotsEnabled(deps)) return null;
  // Snapshots are of the default spec's sandboxes only.
  if ((task.request as StartRequest).sandbox_spec_id) return null;
  // A request or an access the clone would refuse: null here, so PREPARING_REPOSITORY says why, as always.
  const spec = (() => {
    try {
      return repositorySpecOf(task.request);
    } catch {
      return null;
    }
  })();
  if (!spec) return null;
  const fresh = (task.request as { fresh?: boolean | null }).fresh === true;
  const [access, snapshots] = await Promise.all([
    resolveGitAccess(deps, task.userId, spec.provider, spec.fullName).catch(() => null),
    // The user's own only (bounded by REPO_SNAPSHOTS_MAX_PER_USER), last used first.
    fresh ? [] : repoSnapshotsRepository(deps.db).listForUser(task.userId),
  ]);
  if (!access) return null;
  const key: RepoSnapshotKey = {
    userId: task.userId,
    engineId: deps.engineId,
    provider: spec.provider,
    repository: spec.fullName,
    branch: spec.branch ?? "",
    // Known once the host said (confirmSnapshot), or once the clone checked it out.
    commit: "",
    baseImage: deps.config.SANDBOX_IMAGE,
  };
  const same = snapshots.filter(
    (s) =>
      s.image !== "" &&
      s.engineId === key.engineId &&
      s.provider === key.provider &&
      s.repository === key.repository &&
      s.branch === key.branch &&
      s.baseImage === key.baseImage,
  );
  return { key, access, noHit: fresh || same.length === 0, likely: same[0] ?? null };
};

/**
 * The commit is the host's now (a ref lookup from the worker, with the user's access, as the clone):
 * the snapshot of exactly that commit, if the user has one, is taken. The host is asked only when a
 * snapshot could serve: a first start pays no lookup.
 */
const confirmSnapshot = async (ctx: StartContext, draft: SnapshotDraft): Promise<SnapshotPlan> => {
  const { key, access } = draft;
  if (draft.noHit) return { key, hit: null, access };
  const started = Date.now();
  const spec = { fullName: key.repository, branch: key.branch || null };
  const commit = await commitOfBranch(ctx.deps, access, spec.branch);
  if (!commit) return { key, hit: null, access };
  const confirmed = { ...key, commit };
  const hit = await repoSnapshotsRepository(ctx.deps.db).take(confirmed);
  ctx.log.info(
    { repository: spec.fullName, commit, snapshot: hit?.id ?? null, ms: Date.now() - started },
    hit ? "starting from a snapshot" : "no snapshot of this commit",
  );
  return { key: confirmed, hit, access };
};

/**
 * WAITING_FOR_SANDBOX of a start that may begin from a snapshot. The host is asked for the branch's
 * commit while the sandbox is made from the user's snapshot of the repository used last (the same
 * user's own, never another's): when that is the snapshot of the commit the host names, the start
 * goes on in it; otherwise that sandbox is removed, before anything ran in it, and made again from
 * the right snapshot or the sandbox image. `cloning` is the worker's clone, begun as soon as the start
 * is known to need one (beside the sandbox's making).
 */
export const acquireSandboxForStart = async (
  ctx: StartContext,
  /** False for a start taken over or retried: its own sandbox may exist already, it never begins from a snapshot. */
  mayUseSnapshot: boolean,
  /** Makes the sandbox, from a snapshot's image when given one; it may do its own lookups while that image is looked up. */
  acquire: (snapshotImage: string | undefined | Promise<string | undefined>) => Promise<AcquiredSandbox>,
  beginClone: (plan: SnapshotPlan | null) => void,
): Promise<{ sandbox: AcquiredSandbox; snapshot: SnapshotPlan | null }> => {
  // The database's word on snapshots and the sandbox's own lookups, at once: the sandbox waits for
  // the image only when it is made. A draft that fails fails the making before any create.
  const drafting = mayUseSnapshot ? draftSnapshot(ctx) : Promise.resolve(null);
  const making = acquire(drafting.then((d) => (d && !d.noHit ? d.likely?.image : undefined)));
  // Awaited below; a failure before that is not an unhandled rejection.
  making.catch(() => undefined);
  let draft: SnapshotDraft | null;
  try {
    draft = await drafting;
  } catch (err) {
    await making.catch(() => undefined);
    throw err;
  }
  const likely = draft && !draft.noHit ? draft.likely : null;
  if (!draft || !likely) {
    // No snapshot can serve (there is none of this repository, or the start is `fresh`): no lookup.
    const plan = draft ? await confirmSnapshot(ctx, draft) : null;
    beginClone(plan);
    return { sandbox: await making, snapshot: plan };
  }
  const [made, plan] = await Promise.allSettled([making, confirmSnapshot(ctx, draft)]);
  if (plan.status === "rejected") {
    if (made.status === "fulfilled") await ctx.deps.sandboxes.destroy(made.value.ref);
    throw plan.reason;
  }
  if (made.status === "rejected") throw made.reason;
  if (plan.value.hit?.image === likely.image) return { sandbox: made.value, snapshot: plan.value };
  // Another commit (a push since), or the host could not say: this sandbox is not the start's.
  ctx.log.info({ snapshot: likely.id }, "the snapshot made ahead is not of the branch's commit; made again");
  beginClone(plan.value);
  await ctx.deps.sandboxes.destroy(made.value.ref);
  return { sandbox: await acquire(plan.value.hit?.image), snapshot: plan.value };
};

/** A snapshot recorded as under way, its image not made yet: `commit` makes it; `abandon` gives it up. */
export interface SnapshotInProgress {
  /** Commits the sandbox and records the image, with what the start's hook and skill stages produced; never rejects. */
  commit(stageResults: SnapshotStageResults): Promise<void>;
  /** The start did not get to READY: the row goes, so nothing waits for a commit that will not come. */
  abandon(): Promise<void>;
}

/**
 * After the setup script succeeded: records the user's snapshot as under way, naming the sandbox as
 * its source. From then on the agent's calls into the sandbox wait until its `commit` returns
 * (snapshot-guard.ts), so the start answers READY first and commits after (the commit's disk writes
 * would slow READY's own), and nothing the agent does is ever in a snapshot. The stages after the
 * setup script run before the commit (they only add the hook and read the skills): the image holds
 * the hook, and the row what both stages produced, so a start from the snapshot runs neither.
 * Never fails the start: null when no snapshot is taken.
 */
export const beginSnapshot = async (
  ctx: StartContext,
  plan: SnapshotPlan,
  sandbox: AcquiredSandbox,
  workspace: Workspace,
): Promise<SnapshotInProgress | null> => {
  const { deps } = ctx;
  if (!snapshotsEnabled(deps) || !workspace.setupHash) return null;
  // The commit the clone checked out: a push between the ref lookup and the clone keys it right.
  const commit = workspace.commit ?? plan.key.commit;
  if (!commit) return null;
  const key = {
    ...plan.key,
    commit,
    setupHash: workspace.setupHash,
    hasPreCommit: workspace.hasPreCommitScript !== false,
    hasSkills: workspace.hasSkills !== false,
  };
  const snapshots = repoSnapshotsRepository(deps.db);
  let begun: { id: string; replaced: string[] };
  try {
    begun = await snapshots.begin(key, sandbox.ref);
  } catch (err) {
    ctx.log.warn({ err }, "snapshot not taken; the next start clones again");
    return null;
  }
  const { id, replaced } = begun;
  const abandon = async () => {
    await snapshots.abandon(id).catch(() => undefined);
  };
  return {
    abandon,
    async commit(stageResults) {
      const started = Date.now();
      try {
        const made = await deps.sandboxes.commit!(sandbox.ref, {
          baseImage: key.baseImage,
          labels: {
            [ImageLabel.Snapshot]: "1",
            [SandboxLabel.Namespace]: deps.config.REDIS_PREFIX,
            [ImageLabel.SnapshotId]: id,
            [ImageLabel.SnapshotUserId]: key.userId,
            [SandboxLabel.Engine]: deps.engineId,
          },
        });
        // Past SNAPSHOT_COMMIT_MAX_MS a waiter may have abandoned the row: then the image is no one's.
        if (!(await snapshots.complete(id, made.image, made.bytes, stageResults))) {
          await deps.sandboxes.removeImage?.(made.image);
          ctx.log.warn({ snapshot: id, ms: Date.now() - started }, "snapshot given up before its commit returned");
          return;
        }
        ctx.log.info(
          { snapshot: id, image: made.image, bytes: made.bytes, ms: Date.now() - started },
          "snapshot of the repository after its setup script taken",
        );
      } catch (err) {
        // Its row goes at once, so no call into the sandbox waits for it.
        await abandon();
        ctx.log.warn({ err }, "snapshot not taken; the next start clones again");
        return;
      }
      try {
        // What is removed is no start's any more (a worker that dies first leaves the images to the
        // janitor's sweep of images no row owns).
        for (const image of replaced) await deps.sandboxes.removeImage?.(image);
        await evictSnapshots(deps, key.userId);
      } catch (err) {
        ctx.log.warn({ err }, "replaced or evicted snapshots not removed; the janitor will");
      }
    },
  };
};

/** The snapshots past the user's and the engine's bounds go, least recently used first. */
const evictSnapshots = async (deps: WorkerDeps & { engineId: string }, userId: string): Promise<string[]> => {
  const { config } = deps;
  const gone = await repoSnapshotsRepository(deps.db).evictBeyond(userId, deps.engineId, {
    perUserCount: config.REPO_SNAPSHOTS_MAX_PER_USER,
    perUserBytes: config.REPO_SNAPSHOTS_MAX_MB_PER_USER * 1024 * 1024,
    perEngineCount: config.REPO_SNAPSHOTS_MAX_PER_ENGINE,
    perEngineBytes: config.REPO_SNAPSHOTS_MAX_MB_PER_ENGINE * 1024 * 1024,
  });
  for (const s of gone) {
    // In use by a running sandbox: the engine keeps it; the janitor removes it once free (its row is gone).
    if (s.image) await deps.sandboxes.removeImage?.(s.image);
    deps.logger.info({ snapshot: s.id, user_id: s.userId, bytes: s.bytes }, "snapshot evicted (least recently used)");
  }
  return gone.map((s) => s.id);
};

/** A snapshot begun and never completed after this long: its worker died mid-commit. */
const PENDING_SNAPSHOT_MAX_MS = 30 * 60_000;

/**
 * The janitor's part: every snapshot image of this deployment on this engine whose row is gone (its
 * user was removed, it was evicted while a sandbox ran from it, or its worker died before recording
 * it) is removed. Returns the images removed.
 */
export const removeOrphanSnapshots = async (deps: WorkerDeps): Promise<string[]> => {
  if (!deps.engineId || !deps.sandboxes.listImages || !deps.sandboxes.removeImage) return [];
  const snapshots = repoSnapshotsRepository(deps.db);
  await snapshots.removeStalePending(deps.engineId, PENDING_SNAPSHOT_MAX_MS);
  const images = await deps.sandboxes.listImages({
    [ImageLabel.Snapshot]: "1",
    [SandboxLabel.Namespace]: deps.config.REDIS_PREFIX,
  });
  if (images.length === 0) return [];
  // Listed after the images: a row begun after the listing (its image younger still) is not missed.
  const owned = await snapshots.idsOnEngine(deps.engineId);
  const removed: string[] = [];
  for (const img of images) {
    const id = img.labels[ImageLabel.SnapshotId];
    if (id && owned.has(id)) continue;
    await deps.sandboxes.removeImage(img.image);
    deps.logger.info({ image: img.image, snapshot: id ?? null }, "janitor removed a snapshot no user owns");
    removed.push(img.image);
  }
  return removed;
};
