import { sandboxesRepository, startTasksRepository } from "@tern/db";
import type { ServiceProcess } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStartHarness, type StartHarness, uuidOf } from "./start-harness.ts";

let h: StartHarness;
let api: ServiceProcess;
let key: string;
let userId: string;

beforeAll(async () => {
  h = await createStartHarness();
  await h.git.createFixtureRepo("acme/app", { "src/a.txt": "a\n" });
  await h.git.createFixtureRepo("acme/broken-setup", {
    ".openhands/setup.sh": "#!/bin/bash\necho 'installing deps'\necho 'npm ERR! missing package.json' >&2\nexit 1\n",
  });
  await h.git.createFixtureRepo("acme/endless-setup", {
    ".openhands/setup.sh": "#!/bin/bash\necho 'waiting forever'\n(sleep 1000) &\nsleep 1000\n",
  });
  // The repository's own code breaks what the next stages need: `.git/hooks` becomes a file, and
  // the skills directory becomes unreadable to the sandbox user.
  await h.git.createFixtureRepo("acme/breaks-hooks", {
    ".openhands/setup.sh": "#!/bin/bash\nrm -rf .git/hooks && echo 'not a directory' > .git/hooks\n",
    ".openhands/pre-commit.sh": "#!/bin/bash\nexit 0\n",
  });
  await h.git.createFixtureRepo("acme/breaks-skills", {
    ".openhands/setup.sh": "#!/bin/bash\nchmod 000 .openhands/skills/a.md\n",
    ".openhands/skills/a.md": "# a\nsome skill\n",
  });
  // Past GIT_CLONE_MAX_MB (1 MiB below) as checked out, with and without a setup script (whose exec
  // carries the tree into the sandbox).
  const big = "x".repeat(1_600_000);
  await h.git.createFixtureRepo("acme/too-large", { "data.txt": big });
  await h.git.createFixtureRepo("acme/too-large-setup", {
    "data.txt": big,
    ".openhands/setup.sh": "#!/bin/bash\nexit 0\n",
  });
  [api] = await Promise.all([h.startApi(), h.startWorker({ SETUP_SCRIPT_TIMEOUT: "2", GIT_CLONE_MAX_MB: "1" })]);
  ({ key, userId } = await h.newUser());
});

afterAll(async () => {
  await h?.close();
  expect(await h.sandboxes()).toEqual([]);
});

/** A start that must end in ERROR at `stage`, with `cause` in its detail, and leave no container. */
const expectFailure = async (taskId: string, stage: string, cause: RegExp) => {
  const { task, seen } = await h.waitForTask(taskId);
  expect(task.status).toBe("ERROR");
  expect(task.detail).toMatch(new RegExp(`^${stage}: `));
  expect(task.detail).toMatch(cause);
  expect(seen).not.toContain("READY");
  // At once: a user's error is not retried.
  expect(task.attempt).toBe(1);
  const sandbox = await sandboxesRepository(h.database.db).findByTask(uuidOf(taskId));
  if (sandbox) expect(sandbox.status).toBe("ERROR");
  const left = (await h.sandboxes()).filter((c) => c.labels["tern.task_id"] === uuidOf(taskId));
  expect(left).toEqual([]);
  const conversation = await h.database.db
    .selectFrom("conversations")
    .select("id")
    .where("start_task_id", "=", uuidOf(taskId))
    .executeTakeFirst();
  expect(conversation).toBeUndefined();
  return task;
};

const startViaApi = async (body: Record<string, unknown>): Promise<string> => {
  const res = await h.post(api, key, body);
  expect(res.status).toBe(200);
  return ((await res.json()) as { id: string }).id;
};

describe("starts that fail end in ERROR with the stage, the cause and no container", () => {
  it("an unknown repository", async () => {
    const id = await startViaApi({ selected_repository: "acme/nope" });
    // Said as "no access" would be: which private repositories exist is not told.
    await expectFailure(id, "PREPARING_REPOSITORY", /repository acme\/nope was not found, or cannot be read/);
  });

  it("an unknown branch", async () => {
    const id = await startViaApi({ selected_repository: "acme/app", selected_branch: "does-not-exist" });
    await expectFailure(id, "PREPARING_REPOSITORY", /branch 'does-not-exist' not found in acme\/app/);
  });

  it("a repository larger than GIT_CLONE_MAX_MB, with a setup script or without", async () => {
    for (const repository of ["acme/too-large", "acme/too-large-setup"]) {
      const id = await startViaApi({ selected_repository: repository });
      await expectFailure(id, "PREPARING_REPOSITORY", /the repository is larger than GIT_CLONE_MAX_MB \(1 MiB\)/);
    }
  });

  it("a setup script that exits 1, with the exit code and its last output", async () => {
    const id = await startViaApi({ selected_repository: "acme/broken-setup" });
    const task = await expectFailure(id, "RUNNING_SETUP_SCRIPT", /exited with code 1/);
    expect(task.detail).toContain("npm ERR! missing package.json");
    expect(await startTasksRepository(h.database.db).getSetupOutput(task.id)).toContain("installing deps");
  });

  it("a setup script that never ends, stopped at SETUP_SCRIPT_TIMEOUT", async () => {
    const id = await startViaApi({ selected_repository: "acme/endless-setup" });
    const task = await expectFailure(id, "RUNNING_SETUP_SCRIPT", /did not finish within 2 s/);
    expect(task.detail).toContain("waiting forever");
  });

  it("a repository whose setup script breaks its own git hooks: the repository's fault, not retried", async () => {
    const id = await startViaApi({ selected_repository: "acme/breaks-hooks" });
    await expectFailure(id, "SETTING_UP_GIT_HOOKS", /installing the pre-commit hook failed/);
  });

  it("a repository whose setup script makes its skills unreadable: the repository's fault, not retried", async () => {
    const id = await startViaApi({ selected_repository: "acme/breaks-skills" });
    await expectFailure(id, "SETTING_UP_SKILLS", /reading the skills failed/);
  });

  it("a repository name that is an option: refused by the API (422) and, inserted directly, by the worker", async () => {
    for (const name of ["--upload-pack=touch /tmp/pwned", "acme/--upload-pack=x", "acme/../../etc"]) {
      const res = await h.post(api, key, { selected_repository: name });
      expect(res.status).toBe(422);
    }
    const direct = await h.enqueueDirect(userId, { selected_repository: "--upload-pack=touch /tmp/pwned" });
    await expectFailure(direct, "PREPARING_REPOSITORY", /invalid repository name '--upload-pack=touch \/tmp\/pwned'/);
    const branch = await h.enqueueDirect(userId, { selected_repository: "acme/app", selected_branch: "--orphan" });
    await expectFailure(branch, "PREPARING_REPOSITORY", /invalid branch name '--orphan'/);
    // Nothing ran the would-be upload pack: the git server never saw a request for it.
    expect(h.git.requests.filter((r) => r.includes("upload-pack=") || r.includes("--"))).toEqual([]);
  });
});
