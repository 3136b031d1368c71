import { randomBytes } from "node:crypto";
import { setGitProvider } from "@tern/services";
import { type GitServer, scaled, startGitServer, testSecretBox } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStartHarness, type StartHarness } from "./start-harness.ts";

// Each user clones with their own token. The git server here answers a token only for the
// repositories it was given (404 for the others, as GitHub does), and the deployment's GIT_TOKEN,
// which reads everything, is not shared (GIT_TOKEN_SHARED unset).

let h: StartHarness;
let git: GitServer;
const aliceToken = `alice_${randomBytes(8).toString("hex")}`;
const bobToken = `bob_${randomBytes(8).toString("hex")}`;
const serverToken = `server_${randomBytes(8).toString("hex")}`;

beforeAll(async () => {
  h = await createStartHarness();
  git = await startGitServer({
    host: new URL(h.git.url).hostname,
    token: serverToken,
    repoTokens: { [aliceToken]: ["alice/private"], [bobToken]: ["bob/private"] },
  });
  await git.createFixtureRepo("alice/private", { "alice.txt": "alice\n" });
  await git.createFixtureRepo("bob/private", { "bob.txt": "bob\n" });
  await h.startWorker({ GIT_BASE_URL: git.url, GIT_TOKEN: serverToken, GIT_TOKEN_SHARED: "false" });
}, scaled(60_000));

afterAll(async () => {
  await h?.close();
  await git?.close();
});

const start = async (userId: string, repository: string) => {
  const taskId = await h.enqueueDirect(userId, { selected_repository: repository });
  return (await h.waitForTask(taskId, 60_000)).task;
};

describe("clones with the requesting user's own token", () => {
  it("two users each clone only what their own token reads; not found and no access read the same", async () => {
    const deps = { db: h.database.db, secretBox: testSecretBox() };
    const alice = await h.newUser();
    const bob = await h.newUser();
    const carol = await h.newUser();
    await setGitProvider(deps, alice.userId, { provider: "github", token: aliceToken });
    await setGitProvider(deps, bob.userId, { provider: "github", token: bobToken });

    const [aliceOwn, aliceOther, aliceMissing, bobOwn, bobOther, carolAny] = await Promise.all([
      start(alice.userId, "alice/private"),
      start(alice.userId, "bob/private"),
      start(alice.userId, "alice/does-not-exist"),
      start(bob.userId, "bob/private"),
      start(bob.userId, "alice/private"),
      // No token of her own, and the deployment's is not shared: private repositories are out of reach.
      start(carol.userId, "alice/private"),
    ]);
    expect(aliceOwn.status).toBe("READY");
    expect(bobOwn.status).toBe("READY");
    for (const t of [aliceOther, aliceMissing, bobOther, carolAny]) {
      expect(t.status).toBe("ERROR");
      // The user's to fix: at once.
      expect(t.attempt).toBe(1);
    }
    // "No access" and "not found" give the same words, but for the name asked for.
    const shape = (detail: string | null, name: string) => detail?.replace(name, "<repo>");
    expect(shape(aliceOther.detail, "bob/private")).toBe(shape(aliceMissing.detail, "alice/does-not-exist"));
    expect(aliceOther.detail).toBe(
      "PREPARING_REPOSITORY: repository bob/private was not found, or cannot be read with your github token (or the github token was refused)",
    );
    expect(carolAny.detail).toMatch(/without a github token/);
    for (const t of [aliceOther, aliceMissing, bobOther, carolAny]) {
      for (const token of [aliceToken, bobToken, serverToken]) expect(t.detail).not.toContain(token);
    }
  });

  it("a user's own host on a private network is refused unless the operator allows it", async () => {
    const eve = await h.newUser();
    await setGitProvider({ db: h.database.db, secretBox: testSecretBox() }, eve.userId, {
      provider: "github",
      token: aliceToken,
      host: git.url,
    });
    const refused = await start(eve.userId, "alice/private");
    expect(refused.status).toBe("ERROR");
    expect(refused.detail).toMatch(/^PREPARING_REPOSITORY: the github host must be reached over https/);
  });
});
