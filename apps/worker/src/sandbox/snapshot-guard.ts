import type { Logger } from "@tern/core";
import { type Database, repoSnapshotsRepository } from "@tern/db";
import type { SandboxDriver, SandboxRef } from "@tern/sandbox";
import type { Kysely } from "kysely";

/**
 * Longest a snapshot's commit may take. A commit still under way past it is presumed dead (its
 * worker died mid-commit): the first call that waits for it abandons it and goes on, and the
 * committing worker, should it still finish, finds its row gone and removes the image.
 */
const SNAPSHOT_COMMIT_MAX_MS = 120_000;
const POLL_MS = 20;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface SnapshotGuardOptions {
  /** SNAPSHOT_COMMIT_MAX_MS unless a test says otherwise. */
  commitMaxMs?: number;
  logger?: Logger;
}

/**
 * Until the commit of a snapshot taken from `ref` is complete, waits: the start answered READY
 * before its snapshot's commit returned, and anything the agent did in the sandbox meanwhile would
 * be in the image, served to the user's next start. One indexed read when nothing is under way.
 */
const waitForSnapshotsOf = async (
  db: Kysely<Database>,
  ref: SandboxRef,
  opts: SnapshotGuardOptions = {},
): Promise<void> => {
  const snapshots = repoSnapshotsRepository(db);
  const maxMs = opts.commitMaxMs ?? SNAPSHOT_COMMIT_MAX_MS;
  for (;;) {
    const pending = await snapshots.pendingFrom(ref);
    if (pending.length === 0) return;
    const overdue = pending.filter((p) => p.ageMs > maxMs);
    for (const p of overdue) {
      if (await snapshots.abandon(p.id)) {
        opts.logger?.warn({ snapshot: p.id, sandbox: ref, age_ms: p.ageMs }, "snapshot commit overdue; abandoned");
      }
    }
    if (overdue.length === pending.length) continue;
    await sleep(POLL_MS);
  }
};

/**
 * The driver the agent's calls go through (its runs, the agent-server operations): each call that
 * can change a sandbox first waits for that sandbox's snapshot commit (waitForSnapshotsOf). The
 * start's own stages use the driver itself: they run beside the commit on purpose.
 */
export const snapshotGuardedDriver = (
  driver: SandboxDriver,
  db: Kysely<Database>,
  opts: SnapshotGuardOptions = {},
): SandboxDriver => {
  const wait = (ref: SandboxRef) => waitForSnapshotsOf(db, ref, opts);
  const guarded: SandboxDriver = {
    ...driver,
    exec: async (ref, execOpts) => {
      await wait(ref);
      return driver.exec(ref, execOpts);
    },
    upload: async (ref, destDir, files) => {
      await wait(ref);
      return driver.upload(ref, destDir, files);
    },
    putArchive: async (ref, destDir, archive) => {
      await wait(ref);
      return driver.putArchive(ref, destDir, archive);
    },
  };
  const { openProcess } = driver;
  if (openProcess) {
    guarded.openProcess = async (ref, processOpts) => {
      await wait(ref);
      return openProcess.call(driver, ref, processOpts);
    };
  }
  return guarded;
};
