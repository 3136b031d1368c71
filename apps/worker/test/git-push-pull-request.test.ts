import { randomBytes } from "node:crypto";
import type { StoredEvent } from "@tern/core";
import { conversationsRepository, eventsRepository, pullRequestsRepository } from "@tern/db";
import { setGitProvider } from "@tern/services";
import {
  type GitServer,
  type ProviderApiServer,
  type ScriptedLlmServer,
  scaled,
  startGitServer,
  startLlmServer,
  startProviderApiServer,
  testSecretBox,
  waitFor,
} from "@tern/testing";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStartHarness, type StartHarness, uuidOf } from "./start-harness.ts";

// Push and pull requests from outside the sandbox: a scripted model edits a file, commits
// on a branch, calls git_push and create_pull_request. The worker takes the commits out of the
// sandbox (a bundle), pushes them with the user's token to the test git server (receive-pack on),
// and opens the pull request on a scripted GitHub API that records the call.

let h: StartHarness;
let git: GitServer;
let llm: ScriptedLlmServer;
let providerApi: ProviderApiServer;
const userToken = `ghp_user_${randomBytes(10).toString("hex")}`;
// Reads the repository (the start clones it) but may not push, and the provider API refuses it.
const readOnlyToken = `ghp_readonly_${randomBytes(10).toString("hex")}`;
let worker: Awaited<ReturnType<StartHarness["startWorker"]>>;

beforeAll(async () => {
  h = await createStartHarness();
  git = await startGitServer({
    host: new URL(h.git.url).hostname,
    repoTokens: { [userToken]: ["acme/app", "group/sub/lab"], [readOnlyToken]: ["acme/app:read"] },
    receivePack: true,
  });
  await git.createFixtureRepo("acme/app", { "a.txt": "before\n" });
  await git.createFixtureRepo("group/sub/lab", { "a.txt": "before\n" });
  llm = await startLlmServer();
  providerApi = await startProviderApiServer({ tokens: [userToken] });
  worker = await h.startWorker({
    GIT_BASE_URL: git.url,
    GIT_TOKEN: "",
    GIT_TOKEN_SHARED: "false",
    GIT_API_URL_GITHUB: providerApi.githubUrl,
    GIT_BASE_URL_GITLAB: git.url,
    GIT_API_URL_GITLAB: providerApi.gitlabUrl,
    ...llm.workerEnv("openai"),
  });
}, scaled(60_000));

afterAll(async () => {
  await h?.close();
  await git?.close();
  await llm?.close();
  await providerApi?.close();
});

const call = (name: string, args: Record<string, unknown>) => ({ toolCalls: [{ name, arguments: args }] });

const runConversation = async (userId: string, repository = "acme/app", provider: "github" | "gitlab" = "github") => {
  const taskId = await h.enqueueDirect(userId, {
    selected_repository: repository,
    git_provider: provider,
    initial_message: { role: "user", content: [{ type: "text", text: "fix a.txt and send a PR" }], run: true },
  });
  const { task } = await h.waitForTask(taskId, 60_000);
  expect(task.status).toBe("READY");
  const conversationId = task.appConversationId!;
  await waitFor(
    async () =>
      (await h.database.db
        .selectFrom("agent_runs")
        .select("id")
        .where("conversation_id", "=", conversationId)
        .where("ended_at", "is not", null)
        .executeTakeFirst()) !== undefined,
    { what: "the agent run to end", timeoutMs: 90_000 },
  );
  const events = await eventsRepository(h.database.db).listAll(conversationId);
  return { conversationId, events, taskId };
};

const observations = (events: StoredEvent[], kind: string) =>
  events
    .filter((e) => e.kind === "ObservationEvent")
    .map(
      (e) =>
        e as unknown as { payload?: { observation: Record<string, unknown> }; observation?: Record<string, unknown> },
    )
    .map((e) => e.observation ?? e.payload?.observation)
    .filter((o): o is Record<string, unknown> => o?.kind === kind);

describe("git_push and create_pull_request, run by the worker", () => {
  it("push the agent's branch and open the pull request with the user's token, which never enters the sandbox", async () => {
    const user = await h.newUser();
    await setGitProvider({ db: h.database.db, secretBox: testSecretBox() }, user.userId, {
      provider: "github",
      token: userToken,
    });
    llm.push(
      call("terminal", {
        command:
          "git checkout -q -b fix-a && echo after > a.txt && git commit -qam 'fix a.txt' && git log --oneline | head -n 1",
      }),
      call("git_push", { branch: "fix-a" }),
      call("create_pull_request", { title: "Fix a.txt", body: "It said before.", base: "main", head: "fix-a" }),
      call("finish", { message: "done" }),
    );
    const { conversationId, events } = await runConversation(user.userId);

    // The branch is on the git server, with the agent's change.
    expect(await git.show("acme/app", "fix-a:a.txt")).toBe("after\n");
    expect(
      git.requests.some((r) => r.startsWith("POST /acme/app.git/git-receive-pack") && r.endsWith(" authorized")),
    ).toBe(true);
    // The pull request call, as GitHub's API got it.
    const prCalls = providerApi.calls.filter((c) => c.method === "POST" && c.path === "/repos/acme/app/pulls");
    expect(prCalls).toHaveLength(1);
    expect(prCalls[0]).toMatchObject({
      authorized: true,
      body: { title: "Fix a.txt", body: "It said before.", head: "fix-a", base: "main" },
    });
    // Its URL is an observation, and its number is kept with the conversation.
    const [push] = observations(events, "GitPushObservation");
    expect(push?.is_error).toBe(false);
    const [pr] = observations(events, "PullRequestObservation");
    expect(pr).toMatchObject({ is_error: false, pr_number: 41 });
    expect(String(pr?.url)).toMatch(/\/acme\/app\/pull\/41$/);
    expect(await pullRequestsRepository(h.database.db).numbersOf(uuidOf(conversationId))).toEqual([41]);
    // The conversation record's pr_number, as OpenHands keeps it.
    expect((await conversationsRepository(h.database.db).get(uuidOf(conversationId)))?.prNumber).toEqual([41]);

    // The token: in no event, no sandbox file or process, no log line.
    const stored = await sql<{
      text: string;
    }>`select coalesce(string_agg(row_to_json(e)::text, ' '), '') as text from events e`.execute(h.database.db);
    expect(stored.rows[0]?.text).not.toContain(userToken);
    const sandbox = (await h.sandboxes()).find((s) => s.labels["tern.conversation_id"] === uuidOf(conversationId));
    expect(sandbox).toBeDefined();
    const hex = [...Buffer.from(userToken)].map((b) => `\\x${b.toString(16).padStart(2, "0")}`).join("");
    const scan = await h.execIn(
      sandbox!.name,
      `t="$(printf '%b' '${hex}')"; grep -rlIs -e "$t" / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev; for f in /proc/[0-9]*/environ; do grep -lsa -e "$t" "$f"; done; exit 0`,
    );
    expect(scan.output.trim()).toBe("");
    expect(worker.output()).not.toContain(userToken);
  });

  it("a token the provider refuses becomes an observation naming the provider, never the token", async () => {
    const user = await h.newUser();
    await setGitProvider({ db: h.database.db, secretBox: testSecretBox() }, user.userId, {
      provider: "github",
      token: readOnlyToken,
    });
    llm.push(
      call("terminal", { command: "git checkout -q -b fix-b && echo b > a.txt && git commit -qam b" }),
      call("git_push", { branch: "fix-b" }),
      call("create_pull_request", { title: "B", body: "", base: "main", head: "fix-b" }),
      call("finish", { message: "done" }),
    );
    const { events } = await runConversation(user.userId);
    const [push] = observations(events, "GitPushObservation");
    expect(push?.is_error).toBe(true);
    expect(JSON.stringify(push)).toMatch(/github refused the push to acme\/app: the github token was refused/);
    const [pr] = observations(events, "PullRequestObservation");
    expect(pr?.is_error).toBe(true);
    expect(JSON.stringify(pr)).toMatch(/github refused the pull request on acme\/app: the github token was refused/);
    const text = JSON.stringify(events);
    expect(text).not.toContain(readOnlyToken);
    expect(await git.show("acme/app", "fix-b:a.txt")).toBeNull();
    expect(worker.output()).not.toContain(readOnlyToken);
  });

  it("opens a GitLab merge request through its API, and finds it again rather than open a second", async () => {
    const user = await h.newUser();
    await setGitProvider({ db: h.database.db, secretBox: testSecretBox() }, user.userId, {
      provider: "gitlab",
      token: userToken,
    });
    const mr = { title: "Fix", body: "gl", base: "main", head: "fix-gl" };
    llm.push(
      call("terminal", { command: "git checkout -q -b fix-gl && echo gl > a.txt && git commit -qam gl" }),
      call("git_push", { branch: "fix-gl" }),
      call("create_pull_request", mr),
      call("create_pull_request", mr),
      call("finish", { message: "done" }),
    );
    const { conversationId, events } = await runConversation(user.userId, "group/sub/lab", "gitlab");
    expect(await git.show("group/sub/lab", "fix-gl:a.txt")).toBe("gl\n");
    const created = providerApi.calls.filter(
      (c) => c.method === "POST" && c.path === "/api/v4/projects/group%2Fsub%2Flab/merge_requests",
    );
    expect(created).toHaveLength(2);
    expect(created[0]).toMatchObject({
      authorized: true,
      body: { source_branch: "fix-gl", target_branch: "main", title: "Fix" },
    });
    const prs = observations(events, "PullRequestObservation");
    expect(prs.map((o) => o.is_error)).toEqual([false, false]);
    expect(prs[0]?.pr_number).toBe(prs[1]?.pr_number);
    expect(JSON.stringify(prs[1])).toContain("was already open");
    expect(await pullRequestsRepository(h.database.db).numbersOf(uuidOf(conversationId))).toEqual([prs[0]?.pr_number]);
  });
});
