import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type { StartRequest } from "@tern/core";
import { conversationsRepository, repoSnapshotsRepository, sandboxesRepository, startTasksRepository } from "@tern/db";
import { SandboxLabel } from "@tern/sandbox";
import { type ServiceProcess, testSandboxDriver, waitFor } from "@tern/testing";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStartHarness, type StartHarness } from "./start-harness.ts";

const run = promisify(execFile);

let h: StartHarness;
let worker: ServiceProcess;
const driver = testSandboxDriver();

/** Writes a random stamp once per run of the script: a sandbox from a snapshot has the first run's. */
const setupScript = (version: string) => `#!/bin/bash
set -e
echo "${version}-$RANDOM$RANDOM-$(date +%s%N)" > .setup-stamp
echo "setup ${version} ran"
`;

const REPO = "acme/snap";

const docker = async (...args: string[]): Promise<string> => (await run("docker", args)).stdout.trim();
const imageExists = async (image: string): Promise<boolean> =>
  docker("image", "inspect", image).then(
    () => true,
    () => false,
  );

/** Pushes a commit with `files` onto `branch` of a fixture repository. */
const pushCommit = async (branch: string, files: Record<string, string>): Promise<void> => {
  const work = await mkdtemp(join(tmpdir(), "tern-snap-push-"));
  const env = {
    ...process.env,
    GIT_AUTHOR_NAME: "Fixture",
    GIT_AUTHOR_EMAIL: "fixture@example.test",
    GIT_COMMITTER_NAME: "Fixture",
    GIT_COMMITTER_EMAIL: "fixture@example.test",
    GIT_CONFIG_NOSYSTEM: "1",
    HOME: work,
  };
  const git = (...args: string[]) => run("git", args, { cwd: work, env });
  try {
    await git("clone", "--quiet", "--branch", branch, join(h.git.root, `${REPO}.git`), ".");
    for (const [path, content] of Object.entries(files)) await writeFile(join(work, path), content, { mode: 0o755 });
    await git("commit", "--quiet", "-am", "change");
    await git("push", "--quiet", "origin", branch);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
};

interface Started {
  taskId: string;
  stageDurations: Record<string, number>;
  sandbox: string;
  /** The image the sandbox runs from (its id). */
  image: string;
  stamp: string;
  setupOutput: string | null;
}

const start = async (userId: string, extra: Partial<StartRequest> = {}): Promise<Started> => {
  const taskId = await h.enqueueDirect(userId, { selected_repository: REPO, git_provider: "github", ...extra });
  const { task } = await h.waitForTask(taskId);
  expect(task.detail).toBeNull();
  expect(task.status).toBe("READY");
  // READY may come before the snapshot's commit returns: the tests below read it once it is done.
  await waitFor(async () => (await snapshotsOf(userId)).every((s) => s.image !== ""), {
    what: "the start's snapshot committed",
  });
  const row = await sandboxesRepository(h.database.db).findByTask(task.id);
  const sandbox = row!.name;
  const stamp = await h.execIn(sandbox, "cat /workspace/snap/.setup-stamp");
  expect(stamp.exitCode).toBe(0);
  return {
    taskId: task.id,
    stageDurations: task.stageDurations,
    sandbox,
    image: await docker("inspect", "--format", "{{.Image}}", sandbox),
    stamp: stamp.output.trim(),
    setupOutput: await startTasksRepository(h.database.db).getSetupOutput(task.id),
  };
};

const snapshotsOf = (userId: string) => repoSnapshotsRepository(h.database.db).listForUser(userId);

/** The execs the engine ran in a start's sandbox from the task's creation to its READY (the engine's own record). */
const execsBeforeReady = async (taskId: string): Promise<number> => {
  const task = await startTasksRepository(h.database.db).get(taskId);
  const events = await docker(
    "events",
    "--since",
    task!.createdAt,
    "--until",
    task!.updatedAt,
    "--filter",
    `label=${SandboxLabel.TaskId}=${taskId}`,
    "--filter",
    "event=exec_create",
    // One line per event: an exec's Action holds its command, which may span lines.
    "--format",
    "{{.Type}}",
  );
  return events === "" ? 0 : events.split("\n").length;
};

const stageHistoryOf = async (taskId: string) =>
  (
    await h.database.db
      .selectFrom("start_tasks")
      .select("stage_history")
      .where("id", "=", taskId)
      .executeTakeFirstOrThrow()
  ).stage_history;

const conversationOf = async (taskId: string) => {
  const task = await startTasksRepository(h.database.db).get(taskId);
  return (await conversationsRepository(h.database.db).get(task!.appConversationId!))!;
};

beforeAll(async () => {
  h = await createStartHarness();
  await h.git.createFixtureRepo(
    REPO,
    { ".openhands/setup.sh": setupScript("v1"), "src/app.js": "1\n" },
    {
      branches: {
        b1: {},
        b2: {},
        b3: {},
        b4: {},
        bump: {},
        tools: {
          ".openhands/pre-commit.sh": "#!/bin/bash\necho hook-ran > .hook-ran\n",
          ".openhands/skills/deploy.md": "---\nname: deployer\ntriggers:\n  - deploy\n---\nRun make deploy.\n",
        },
      },
    },
  );
  await driver.prepare();
  worker = await h.startWorker({ REPO_SNAPSHOTS_MAX_PER_USER: "3", JANITOR_INTERVAL_MS: "500" });
});

afterAll(async () => {
  await h?.close();
  expect(await h.sandboxes()).toEqual([]);
  // Every image this file made is gone with its users.
  const left = await docker("images", "-q", "--filter", `label=tern.namespace=${h.prefix}`);
  if (left) await run("docker", ["rmi", "-f", ...left.split("\n")]).catch(() => undefined);
});

describe("repository snapshots", () => {
  it("a repeat start of the same user, repository and commit begins from the snapshot, skipping clone and setup", async () => {
    const { userId } = await h.newUser();
    const first = await start(userId);
    expect(first.setupOutput).toContain("setup v1 ran");
    const [snap] = await snapshotsOf(userId);
    expect(snap).toMatchObject({ repository: REPO, branch: "", userId });
    expect(snap!.image).toMatch(/^sha256:/);
    expect(snap!.bytes).toBeGreaterThan(0);

    const second = await start(userId);
    // From the snapshot's image, with what the first run of setup.sh left; setup.sh did not run again.
    expect(second.image).toBe(snap!.image);
    expect(second.stamp).toBe(first.stamp);
    expect(second.setupOutput).toBeNull();
    // Each stage's database and engine time is kept beside its duration: the create is the engine's.
    expect(second.stageDurations["engine:WAITING_FOR_SANDBOX"]).toBeGreaterThan(0);
    expect(second.stageDurations["db:STARTING_CONVERSATION"]).toBeGreaterThan(0);
    expect(second.stageDurations["engine:RUNNING_SETUP_SCRIPT"]).toBe(0);
    // The repository is as cloned, with its identity, and the hook stage ran again.
    const git = await h.execIn(second.sandbox, "cd /workspace/snap && git log --format=%H -1 && git config user.name");
    expect(git.output).toBe(`${snap!.commit}\nopenhands\n`);
    // Its labels are its own task's, not the snapshot's sandbox's.
    const info = await driver.inspect(second.sandbox);
    expect(info?.labels[SandboxLabel.TaskId]).toBe(second.taskId);
    expect(info?.labels[SandboxLabel.Pool] ?? "").toBe("");
  });

  it("a start from a snapshot runs no exec before READY, yet has the hook installed and the skills loaded", async () => {
    const { userId } = await h.newUser();
    const first = await start(userId, { selected_branch: "tools" });
    const second = await start(userId, { selected_branch: "tools" });
    expect(second.stamp).toBe(first.stamp);
    // The probe sees the first start's execs (its clone's hand-over, setup.sh, the hook, the skills)…
    expect(await execsBeforeReady(first.taskId)).toBeGreaterThanOrEqual(3);
    expect(first.stageDurations["engine:SETTING_UP_GIT_HOOKS"]).toBeGreaterThan(0);
    expect(first.stageDurations["engine:SETTING_UP_SKILLS"]).toBeGreaterThan(0);
    // …and none of the repeat start's: the snapshot's record stood in for the hook and skill stages.
    expect(await execsBeforeReady(second.taskId)).toBe(0);
    expect(second.stageDurations["engine:SETTING_UP_GIT_HOOKS"]).toBe(0);
    expect(second.stageDurations["engine:SETTING_UP_SKILLS"]).toBe(0);

    // The stages are still in the task's history, each saying where its result came from.
    const history = await stageHistoryOf(second.taskId);
    expect(history.map((e) => e.status)).toEqual([
      "WORKING",
      "WAITING_FOR_SANDBOX",
      "PREPARING_REPOSITORY",
      "RUNNING_SETUP_SCRIPT",
      "SETTING_UP_GIT_HOOKS",
      "SETTING_UP_SKILLS",
      "STARTING_CONVERSATION",
      "READY",
    ]);
    const detailOf = (status: string) => history.find((e) => e.status === status)?.detail;
    expect(detailOf("SETTING_UP_GIT_HOOKS")).toBe("pre-commit hook installed when the snapshot was taken");
    expect(detailOf("SETTING_UP_SKILLS")).toMatch(/^1 skill \(deployer\) as read when the snapshot was taken$/);
    expect(detailOf("PREPARING_REPOSITORY")).toContain("from the snapshot of commit");

    // The hook is installed (from the image) and runs on the agent's commits.
    const commit = await h.execIn(
      second.sandbox,
      "cd /workspace/snap && echo x > f && git add f && git commit -qm t && cat .hook-ran",
    );
    expect(commit).toEqual({ exitCode: 0, output: "hook-ran\n" });
    // The skills are the conversation's, as the first start read them, and the hook is recorded on it.
    const [one, two] = await Promise.all([conversationOf(first.taskId), conversationOf(second.taskId)]);
    expect(two.skills.map((sk) => sk.name)).toEqual(["deployer"]);
    expect(two.skills).toEqual(one.skills);
    expect(two.hooks).toEqual(one.hooks);
    expect(two.hooks.map((hk) => hk.event_type)).toEqual(["pre-commit"]);
  });

  it("a snapshot kept without stage results runs the hook and skill stages once, then keeps what they produced", async () => {
    const { userId } = await h.newUser();
    await start(userId, { selected_branch: "tools" });
    // As a snapshot taken before its stages' results were kept.
    await sql`update repo_snapshots set stage_results = null where user_id = ${userId}`.execute(h.database.db);
    const second = await start(userId, { selected_branch: "tools" });
    expect(second.stageDurations["engine:SETTING_UP_GIT_HOOKS"]).toBeGreaterThan(0);
    expect(second.stageDurations["engine:SETTING_UP_SKILLS"]).toBeGreaterThan(0);
    expect((await conversationOf(second.taskId)).skills.map((sk) => sk.name)).toEqual(["deployer"]);
    const third = await start(userId, { selected_branch: "tools" });
    expect(await execsBeforeReady(third.taskId)).toBe(0);
    expect((await conversationOf(third.taskId)).skills.map((sk) => sk.name)).toEqual(["deployer"]);
  });

  it("never serves another user: each user's start clones and gets a snapshot of its own", async () => {
    const a = await h.newUser();
    const b = await h.newUser();
    const fromA = await start(a.userId);
    const fromB = await start(b.userId);
    expect(fromB.stamp).not.toBe(fromA.stamp);
    expect(fromB.setupOutput).toContain("setup v1 ran");
    const [snapA] = await snapshotsOf(a.userId);
    const [snapB] = await snapshotsOf(b.userId);
    expect(fromB.image).not.toBe(snapA!.image);
    expect(snapB!.image).not.toBe(snapA!.image);
    // Each image is labelled with its owner.
    expect(await docker("image", "inspect", "--format", '{{index .Config.Labels "tern.user_id"}}', snapB!.image)).toBe(
      b.userId,
    );
  });

  it("never serves another commit: a push that changes setup.sh makes the next start clone and run it", async () => {
    const { userId } = await h.newUser();
    const first = await start(userId, { selected_branch: "bump" });
    await pushCommit("bump", { ".openhands/setup.sh": setupScript("v2") });
    const second = await start(userId, { selected_branch: "bump" });
    expect(second.stamp).not.toBe(first.stamp);
    expect(second.stamp).toMatch(/^v2-/);
    expect(second.setupOutput).toContain("setup v2 ran");
    const snaps = await snapshotsOf(userId);
    expect(snaps).toHaveLength(2);
    expect(new Set(snaps.map((s) => s.setupHash)).size).toBe(2);
    expect(second.image).not.toBe(snaps.find((s) => s.commit !== snaps[0]?.commit)?.image);
    // And the start after that takes the new snapshot, not the old one.
    const third = await start(userId, { selected_branch: "bump" });
    expect(third.stamp).toBe(second.stamp);
  });

  it('"fresh": true clones and runs setup.sh anew, and its snapshot replaces the old one', async () => {
    const { userId } = await h.newUser();
    const first = await start(userId);
    const [old] = await snapshotsOf(userId);
    const fresh = await start(userId, { fresh: true });
    expect(fresh.stamp).not.toBe(first.stamp);
    expect(fresh.setupOutput).toContain("setup v1 ran");
    const snaps = await snapshotsOf(userId);
    expect(snaps).toHaveLength(1);
    expect(snaps[0]!.id).not.toBe(old!.id);
    // The next plain start takes the fresh one.
    const again = await start(userId);
    expect(again.stamp).toBe(fresh.stamp);
    // The replaced image is gone once no sandbox runs from it (the first start's still does: the janitor's later).
    await driver.destroy(first.sandbox);
    await waitFor(async () => !(await imageExists(old!.image)), { what: "the replaced snapshot image removed" });
  });

  it("keeps at most the per-user count, evicting the least recently used", async () => {
    const { userId } = await h.newUser();
    const b1 = await start(userId, { selected_branch: "b1" });
    await start(userId, { selected_branch: "b2" });
    await start(userId, { selected_branch: "b3" });
    // b1 used again: b2 is now the least recently used.
    expect((await start(userId, { selected_branch: "b1" })).stamp).toBe(b1.stamp);
    const before = await snapshotsOf(userId);
    const b2Image = before.find((s) => s.branch === "b2")!.image;
    await start(userId, { selected_branch: "b4" });
    const after = await snapshotsOf(userId);
    expect(after.map((s) => s.branch).sort()).toEqual(["b1", "b3", "b4"]);
    await waitFor(async () => !(await imageExists(b2Image)), { what: "the evicted snapshot's image removed" });
  });

  it("is removed with its user", async () => {
    const { userId } = await h.newUser();
    await start(userId, { selected_branch: "b3" });
    const [snap] = await snapshotsOf(userId);
    expect(await imageExists(snap!.image)).toBe(true);
    await sql`delete from users where id = ${userId}`.execute(h.database.db);
    // The janitor removes the user's sandbox, then the image no row owns.
    await waitFor(async () => !(await imageExists(snap!.image)), {
      what: "the removed user's snapshot image removed",
      timeoutMs: 30_000,
    });
  });

  it("with REPO_SNAPSHOTS=false every start clones", async () => {
    await worker.stop();
    worker = await h.startWorker({ REPO_SNAPSHOTS: "false" });
    try {
      const { userId } = await h.newUser();
      const first = await start(userId, { selected_branch: "b2" });
      const second = await start(userId, { selected_branch: "b2" });
      expect(second.stamp).not.toBe(first.stamp);
      expect(await snapshotsOf(userId)).toEqual([]);
    } finally {
      await worker.stop();
      worker = await h.startWorker({ REPO_SNAPSHOTS_MAX_PER_USER: "3", JANITOR_INTERVAL_MS: "500" });
    }
  });
});

describe("the driver's commit", () => {
  const base = "tern-sandbox:latest";
  const limits = { memoryMb: 256, cpus: 1, pids: 128 };
  const nameOf = (suffix: string) => `${h.prefix.replace(/[^A-Za-z0-9_.-]/g, "-")}-${suffix}`;

  it("keeps the files but none of the values commands saw (secrets the setup had), nor the sandbox's labels", async () => {
    const name = nameOf("commit-env");
    const secret = `s3cr3t-${Date.now()}`;
    const baseEnv = JSON.parse(await docker("image", "inspect", "--format", "{{json .Config.Env}}", base)) as string[];
    const info = await driver.create({
      name,
      image: base,
      labels: { [SandboxLabel.Marker]: "1", [SandboxLabel.Namespace]: h.prefix, "tern.task_id": "t-1" },
      limits,
    });
    let image = "";
    try {
      // As the worker gives a command its secrets: in the exec's environment.
      const wrote = await driver.exec(info.ref, {
        cmd: ["bash", "-c", 'echo kept > /home/agent/file; test -n "$SETUP_TOKEN"'],
        env: { SETUP_TOKEN: secret },
      });
      expect(wrote.exitCode).toBe(0);
      const made = await driver.commit!(info.ref, {
        baseImage: base,
        labels: { "tern.snapshot": "1", [SandboxLabel.Namespace]: h.prefix },
      });
      image = made.image;
      // Nowhere in what the engine keeps of the image: its config, the container's config, its history.
      expect(await docker("image", "inspect", image)).not.toContain(secret);
      expect(await docker("history", "--no-trunc", image)).not.toContain(secret);
      const config = JSON.parse(await docker("image", "inspect", "--format", "{{json .Config}}", image)) as {
        Env: string[];
        Labels: Record<string, string>;
      };
      expect([...config.Env].sort()).toEqual([...baseEnv].sort());
      expect(config.Labels["tern.task_id"]).toBe("");
      expect(config.Labels["tern.snapshot"]).toBe("1");
      // A sandbox from it has the file, and no such variable.
      const from = await driver.create({
        name: `${name}-2`,
        image,
        labels: { [SandboxLabel.Marker]: "1", [SandboxLabel.Namespace]: h.prefix },
        limits,
      });
      const r = await driver.exec(from.ref, { cmd: ["bash", "-c", 'cat /home/agent/file; echo "[$SETUP_TOKEN]"'] });
      expect(r.stdout).toBe("kept\n[]\n");
    } finally {
      await driver.destroy(name);
      await driver.destroy(`${name}-2`);
      if (image) await driver.removeImage!(image);
    }
  });

  it("refuses a sandbox created with environment of its own: the engine would keep its values beside the image", async () => {
    const name = nameOf("commit-refused");
    const secret = `s3cr3t-${Date.now()}`;
    const info = await driver.create({
      name,
      image: base,
      labels: { [SandboxLabel.Marker]: "1", [SandboxLabel.Namespace]: h.prefix },
      env: { SETUP_TOKEN: secret },
      limits,
    });
    // Labelled uniquely: had the commit gone through, an image with this label would exist.
    const probe = { "tern.commit_probe": `${Date.now()}-${Math.random()}` };
    try {
      await expect(driver.commit!(info.ref, { baseImage: base, labels: probe })).rejects.toThrow(/SETUP_TOKEN/);
      expect(await docker("images", "-q", "--filter", `label=tern.commit_probe=${probe["tern.commit_probe"]}`)).toBe(
        "",
      );
    } finally {
      await driver.destroy(name);
    }
  });
});
