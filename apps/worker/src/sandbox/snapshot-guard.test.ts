import { repoSnapshotsRepository, usersRepository } from "@tern/db";
import type { ExecOptions, ExecResult, SandboxDriver } from "@tern/sandbox";
import { createTestDatabase, type TestDatabase, waitFor } from "@tern/testing";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { snapshotGuardedDriver } from "./snapshot-guard.ts";

let database: TestDatabase;
let userId: string;

beforeAll(async () => {
  database = await createTestDatabase();
  userId = (await usersRepository(database.db).create()).id;
});

afterAll(async () => database?.drop());

/** A driver that records the sandboxes its execs reached (the guard is the same whatever the driver). */
const recordingDriver = () => {
  const reached: string[] = [];
  const done: ExecResult = { exitCode: 0, stdout: "", stderr: "", timedOut: false, truncated: false, durationMs: 0 };
  const driver = {
    exec: async (ref: string, _opts: ExecOptions) => {
      reached.push(ref);
      return done;
    },
  } as unknown as SandboxDriver;
  return { driver, reached };
};

const key = (repository: string) => ({
  userId,
  engineId: "e1",
  provider: "github",
  repository,
  branch: "",
  commit: "c".repeat(40),
  baseImage: "tern-sandbox:latest",
  setupHash: "a".repeat(40),
  hasPreCommit: false,
  hasSkills: false,
});

/** A tree with no hook and no skill. */
const noStageResults = { hooks: [], skills: [], maxSkillsBytes: 0 };

describe("a sandbox whose snapshot is being committed", () => {
  it("takes the agent's calls only once the commit is recorded; other sandboxes' at once", async () => {
    const snapshots = repoSnapshotsRepository(database.db);
    const { id } = await snapshots.begin(key("acme/one"), "tern-task-one");
    const { driver, reached } = recordingDriver();
    const guarded = snapshotGuardedDriver(driver, database.db);

    const waiting = guarded.exec("tern-task-one", { cmd: ["true"] });
    await guarded.exec("tern-task-other", { cmd: ["true"] });
    expect(reached).toEqual(["tern-task-other"]);
    // Still waiting after several of its polls.
    await new Promise((r) => setTimeout(r, 200));
    expect(reached).toEqual(["tern-task-other"]);

    expect(await snapshots.complete(id, "sha256:one", 10, noStageResults)).toBe(true);
    await waiting;
    expect(reached).toEqual(["tern-task-other", "tern-task-one"]);
  });

  it("gives up on a commit past its time (its worker died): the call goes on, and the commit's late record fails", async () => {
    const snapshots = repoSnapshotsRepository(database.db);
    const { id } = await snapshots.begin(key("acme/two"), "tern-task-two");
    const { driver, reached } = recordingDriver();
    const guarded = snapshotGuardedDriver(driver, database.db, { commitMaxMs: 60_000 });

    const waiting = guarded.exec("tern-task-two", { cmd: ["true"] });
    await new Promise((r) => setTimeout(r, 100));
    expect(reached).toEqual([]);
    // The commit began long ago.
    await sql`update repo_snapshots set created_at = now() - interval '2 minutes' where id = ${id}`.execute(
      database.db,
    );
    await waitFor(() => reached.length === 1, { what: "the call to go on" });
    await waiting;
    expect(await snapshots.complete(id, "sha256:two", 10, noStageResults)).toBe(false);
    expect(await snapshots.listForUser(userId)).not.toContainEqual(expect.objectContaining({ id }));
  });
});
