import { spawn, spawnSync } from "node:child_process";
import { newEvent, toHexId } from "@tern/core";
import { eventsRepository } from "@tern/db";
import {
  appEntry,
  createConversationFixture,
  repoRoot,
  sampleEvent,
  scaled,
  startStack,
  type TestStack,
  waitFor,
} from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/** The client commands as a user runs them (`pnpm --silent cli ...`), against a real API process. */
let stack: TestStack;
let key: string;
let userId: string;

beforeAll(async () => {
  stack = await startStack({ api: true });
  ({ key, userId } = await stack.newUser({ name: "cli" }));
}, scaled(60_000));
afterAll(async () => stack?.close());

const env = () => ({ ...process.env, TERN_API_URL: stack.api.url, TERN_API_KEY: key });
const cli = (args: string[]) =>
  spawnSync(process.execPath, [...appEntry("cli"), ...args], {
    cwd: repoRoot,
    env: env(),
    encoding: "utf8",
    timeout: scaled(30_000),
  });

/** A CLI run in the background, for `watch`: its output so far and its exit code once it ends. */
const cliInBackground = (args: string[]) => {
  const child = spawn(process.execPath, [...appEntry("cli"), ...args], {
    cwd: repoRoot,
    env: env(),
  });
  const out = { stdout: "", stderr: "" };
  child.stdout.on("data", (d) => {
    out.stdout += d;
  });
  child.stderr.on("data", (d) => {
    out.stderr += d;
  });
  const exited = new Promise<number | null>((r) => child.once("close", (code) => r(code)));
  return { out, exited, kill: () => child.kill("SIGKILL") };
};

describe("cli conversations / events / diff", () => {
  it("conversations start prints the start task's id", () => {
    const res = cli(["conversations", "start", "--repo", "acme/widgets", "Fix the bug"]);
    expect(res.status, res.stderr).toBe(0);
    expect(res.stdout).toMatch(/^[0-9a-f]{32}\n$/);
  });

  it("conversations list and events [--kind] print the caller's conversations and events", async () => {
    const { conversationId } = await createConversationFixture(stack.database.db, { userId, title: "Listed one" });
    await eventsRepository(stack.database.db).append(conversationId, [
      newEvent.userMessage([{ type: "text", text: "hello there" }]),
      sampleEvent("ActionEvent", 1),
    ]);
    const list = cli(["conversations", "list"]);
    expect(list.status, list.stderr).toBe(0);
    expect(list.stdout).toContain(toHexId(conversationId));
    expect(list.stdout).toContain("Listed one");

    const all = cli(["events", toHexId(conversationId)]);
    expect(all.status, all.stderr).toBe(0);
    expect(all.stdout).toContain("hello there");
    expect(all.stdout).toContain("$ echo 1");
    const actions = cli(["events", toHexId(conversationId), "--kind", "ActionEvent", "--json"]);
    expect(
      actions.stdout
        .trim()
        .split("\n")
        .map((l) => (JSON.parse(l) as { kind: string }).kind),
    ).toEqual(["ActionEvent"]);
  });

  it("conversations watch follows the events until the agent stops: exit 0 when finished", async () => {
    const { conversationId } = await createConversationFixture(stack.database.db, { userId });
    const events = eventsRepository(stack.database.db);
    // An earlier run that finished, then a new one: the old "finished" is history, not the end.
    await events.append(conversationId, [newEvent.executionStatus("finished"), newEvent.executionStatus("running")]);
    const watch = cliInBackground(["conversations", "watch", toHexId(conversationId)]);
    await waitFor(() => watch.out.stdout.includes("execution_status = running"), { what: "the history" });
    await events.append(conversationId, [sampleEvent("ActionEvent", 7)]);
    await waitFor(() => watch.out.stdout.includes("$ echo 7"), { what: "the live event" });
    await events.append(conversationId, [newEvent.executionStatus("finished")]);
    expect(await watch.exited).toBe(0);
    expect(watch.out.stderr).toContain("the agent stopped: finished");
  });

  it("conversations watch exits 1 when the agent errs", async () => {
    const { conversationId } = await createConversationFixture(stack.database.db, { userId });
    const watch = cliInBackground(["conversations", "watch", toHexId(conversationId)]);
    await waitFor(() => watch.out.stderr.includes("[watch]"), { what: "watch to start" });
    await eventsRepository(stack.database.db).append(conversationId, [
      newEvent.agentError("the model is unreachable"),
      newEvent.executionStatus("error"),
    ]);
    expect(await watch.exited).toBe(1);
    expect(watch.out.stdout).toContain("the model is unreachable");
  });

  it("conversations watch on a start task id shows its stages and exits 1 at ERROR", async () => {
    const task = cli(["conversations", "start", "Fix it"]);
    const taskId = task.stdout.trim();
    const watch = cliInBackground(["conversations", "watch", taskId]);
    await waitFor(() => watch.out.stderr.includes("[start] WORKING"), { what: "the first stage" });
    // No worker runs beside this API: the task says what it waits for, and the CLI shows it.
    expect(watch.out.stderr).toContain("[start] WORKING: waiting for a worker");
    await stack.database.db
      .updateTable("start_tasks")
      .set({ status: "ERROR", detail: "no such repository" })
      .where("id", "=", taskId.replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, "$1-$2-$3-$4-$5"))
      .execute();
    expect(await watch.exited).toBe(1);
    expect(watch.out.stderr).toContain("[start] ERROR: no such repository");
  });

  it("conversations reject ID --reason answers the calls that wait; a second answer exits 1 with the 409", async () => {
    const { conversationId } = await createConversationFixture(stack.database.db, { userId });
    const [action] = await eventsRepository(stack.database.db)
      .append(conversationId, [
        newEvent.executionStatus("running"),
        sampleEvent("ActionEvent", 3),
        newEvent.executionStatus("waiting_for_confirmation"),
      ])
      .then((stored) => stored.filter((e) => e.kind === "ActionEvent"));
    await stack.database.db
      .updateTable("conversations")
      .set({ execution_status: "waiting_for_confirmation" })
      .where("id", "=", conversationId)
      .execute();
    const id = toHexId(conversationId);
    // This conversation has no sandbox: accepted calls could not run, so approve is refused and they keep waiting.
    const refused = cli(["conversations", "approve", id]);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain("sandbox was removed");
    const rejected = cli(["conversations", "reject", id, "--reason", "not on a Friday"]);
    expect(rejected.status, rejected.stderr).toBe(0);
    const rejections = cli(["events", id, "--kind", "UserRejectObservation", "--json"]).stdout.trim().split("\n");
    expect(rejections.map((l) => JSON.parse(l) as { action_id: string; rejection_reason: string })).toEqual([
      expect.objectContaining({ action_id: action?.id, rejection_reason: "not on a Friday" }),
    ]);
    const again = cli(["conversations", "approve", id]);
    expect(again.status).toBe(1);
    expect(again.stderr).toContain("409 conflict");
    expect(cli(["conversations", "approve"]).status).toBe(64);
  });

  it("diff of a conversation without a sandbox says why and exits 1; a bad call exits 64", () => {
    return createConversationFixture(stack.database.db, { userId }).then(({ conversationId }) => {
      const res = cli(["diff", toHexId(conversationId)]);
      expect(res.status).toBe(1);
      expect(res.stderr).toMatch(/410 gone/);
      expect(cli(["diff"]).status).toBe(64);
    });
  });
});
