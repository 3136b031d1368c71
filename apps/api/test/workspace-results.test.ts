import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { toHexId } from "@tern/core";
import { conversationsRepository, sandboxesRepository } from "@tern/db";
import { createSandboxedConversation, scaled, testSandboxDriver } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "./harness.ts";

/**
 * The diff and the workspace archive, end to end: the API in this process, a real worker process
 * (the API reaches the sandbox only through it) and a real sandbox whose workspace is a clone.
 */
let api: TestApi;
let key: string;
let userId: string;
const driver = testSandboxDriver();

beforeAll(async () => {
  api = await startTestApi({ worker: true });
  ({ key, userId } = await api.newUser());
}, scaled(120_000));

afterAll(async () => api?.close());

/** A conversation whose workspace was cloned (as the pipeline does), then changed by "the agent". */
const clonedAndChanged = async () => {
  const { conversationId, sandboxRef } = await createSandboxedConversation({
    db: api.database.db,
    sandboxes: driver,
    namespace: api.prefix,
    userId,
    tools: [],
  });
  const script = `
    set -e
    git config --global user.name t; git config --global user.email t@t
    mkdir -p /tmp/origin && cd /tmp/origin && git init -q . && printf 'one\\ntwo\\n' > README.md && echo bye > old.txt
    git add -A && git commit -qm init
    rm -rf /workspace/project && git clone -q /tmp/origin /workspace/project && cd /workspace/project
    printf 'one\\nchanged\\n' > README.md && rm old.txt && mkdir -p src && echo 'console.log(1)' > src/new.js
    echo node_modules > .gitignore && mkdir node_modules && echo x > node_modules/ignored.js
  `;
  const r = await driver.exec(sandboxRef, { cmd: ["bash", "-c", script] });
  if (r.exitCode !== 0) throw new Error(r.stderr);
  return { conversationId, sandboxRef };
};

const diffPath = (id: string, q = "") => `/api/v1/app-conversations/${toHexId(id)}/diff${q}`;

describe("GET /api/v1/app-conversations/{id}/diff and /workspace.tar.gz", () => {
  it("diffs the workspace against the commit it was cloned at, as text and per file", async () => {
    const { conversationId } = await clonedAndChanged();
    const text = await api.call(diffPath(conversationId), { key });
    expect(text.status).toBe(200);
    expect(text.headers.get("content-type")).toMatch(/^text\/x-diff/);
    const body = await text.text();
    expect(body).toContain("+changed");
    expect(body).toContain("src/new.js");
    expect(body).not.toContain("node_modules/ignored.js");

    const res = await api.call(diffPath(conversationId, "?format=json"), { key });
    expect(res.status).toBe(200);
    const json = (await res.json()) as {
      base_commit: string | null;
      files: { path: string; status: string; additions: number; deletions: number }[];
    };
    expect(json.base_commit).toMatch(/^[0-9a-f]{40}$/);
    const byPath = Object.fromEntries(json.files.map((f) => [f.path, f]));
    expect(byPath["README.md"]).toMatchObject({ status: "modified", additions: 1, deletions: 1 });
    expect(byPath["old.txt"]).toMatchObject({ status: "deleted" });
    expect(byPath["src/new.js"]).toMatchObject({ status: "added", additions: 1 });
    expect(byPath[".gitignore"]).toMatchObject({ status: "added" });
  });

  it("streams the workspace as a .tar.gz", async () => {
    const { conversationId } = await clonedAndChanged();
    const res = await api.call(`/api/v1/app-conversations/${toHexId(conversationId)}/workspace.tar.gz`, { key });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/gzip");
    const dir = mkdtempSync(join(tmpdir(), "tern-archive-"));
    try {
      const file = join(dir, "w.tar.gz");
      writeFileSync(file, Buffer.from(await res.arrayBuffer()));
      const listing = execFileSync("tar", ["tzf", file], { encoding: "utf8" }).split("\n");
      expect(listing).toContain("project/README.md");
      expect(listing).toContain("project/src/new.js");
      expect(listing.some((l) => l.startsWith("project/.git/"))).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("answers 409 while the sandbox is paused, 410 once it is gone, 404 to another user", async () => {
    const { conversationId } = await clonedAndChanged();
    const conversation = await conversationsRepository(api.database.db).get(conversationId);
    const sandboxId = conversation?.sandboxId as string;
    const archivePath = `/api/v1/app-conversations/${toHexId(conversationId)}/workspace.tar.gz`;

    await sandboxesRepository(api.database.db).update(sandboxId, { status: "PAUSED" });
    expect((await api.call(diffPath(conversationId), { key })).status).toBe(409);
    expect((await api.call(archivePath, { key })).status).toBe(409);

    await sandboxesRepository(api.database.db).update(sandboxId, { status: "MISSING" });
    expect((await api.call(diffPath(conversationId), { key })).status).toBe(410);
    expect((await api.call(archivePath, { key })).status).toBe(410);

    const stranger = await api.newUser();
    expect((await api.call(diffPath(conversationId), { key: stranger.key })).status).toBe(404);
    expect((await api.call(archivePath, { key: stranger.key })).status).toBe(404);
  });
});
