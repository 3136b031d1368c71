/// <reference lib="dom" />
import { mkdirSync } from "node:fs";
import { newEvent, toHexId } from "@tern/core";
import { eventsRepository, sandboxesRepository } from "@tern/db";
import { readOnlyKeyOf } from "@tern/services";
import { createConversationFixture, sampleEvent, scaled } from "@tern/testing";
import puppeteer, { type Browser, type Page } from "puppeteer-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StreamTestApi, startStreamTestApi } from "./stream-harness.ts";

/** The conversation page in a real headless Chromium (Debian's `chromium`), against the API with live streams. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const ARTIFACTS = new URL("./artifacts/", import.meta.url);
const XSS = `<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">`;

let t: StreamTestApi;
let browser: Browser;
let key: string;
let userId: string;

beforeAll(async () => {
  t = await startStreamTestApi();
  ({ key, userId } = await t.api.newUser());
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
}, scaled(60_000));
afterAll(async () => {
  await browser?.close();
  await t?.close();
});

const db = () => t.api.database.db;

const signIn = async (page: Page, pageUrl: string, withKey: string) => {
  await page.goto(pageUrl);
  await page.waitForSelector("#sign-in:not([hidden])");
  await page.type("#key", withKey);
  await page.click("#sign-in-form button[type=submit]");
  await page.waitForSelector("#main:not([hidden])");
};

const eventTexts = (page: Page) => page.$$eval("#events article", (els) => els.map((e) => e.textContent ?? ""));

describe("the conversation page", () => {
  it("signs in with a pasted key, shows events live without reload, and keeps every event's text inert", async () => {
    const { conversationId, taskId } = await createConversationFixture(db(), { userId, title: "Fix the widgets" });
    // A live sandbox, so that a follow-up may ask for a run (no worker takes it here).
    const sandbox = await sandboxesRepository(db()).upsert({
      name: `page-test-${conversationId}`,
      image: "tern-sandbox:latest",
      startTaskId: taskId,
      conversationId,
      status: "RUNNING",
    });
    await db().updateTable("conversations").set({ sandbox_id: sandbox.id }).where("id", "=", conversationId).execute();
    await eventsRepository(db()).append(conversationId, [
      newEvent.userMessage([{ type: "text", text: `Please look at ${XSS}` }]),
      sampleEvent("ActionEvent", 1),
      sampleEvent("ObservationEvent", 1),
      newEvent.executionStatus("running"),
    ]);
    const context = await browser.createBrowserContext();
    const page = await context.newPage();
    await page.setViewport({ width: 1100, height: 900 });
    await signIn(page, `${t.url()}/conversations/${toHexId(conversationId)}`, key);
    await page.waitForFunction(() => document.querySelectorAll("#events article").length === 4);
    expect(await page.$eval("#title", (e) => e.textContent)).toBe("Fix the widgets");
    expect((await eventTexts(page))[0]).toContain(XSS);
    expect(await page.$eval("#events article", (e) => e.querySelector("script, img") === null)).toBe(true);
    expect(await page.evaluate(() => (window as { __pwned?: number }).__pwned)).toBeUndefined();
    expect(await page.$eval("#execution-status", (e) => e.textContent)).toBe("running");

    // Appended while the page is open: it shows up without a reload.
    await eventsRepository(db()).append(conversationId, [
      newEvent.agentMessage(`Done. ${XSS}`, { llm_response_id: "r9", history_seq: 9 }),
      newEvent.executionStatus("finished"),
    ]);
    await page.waitForFunction(() => document.querySelectorAll("#events article").length === 6);
    expect((await eventTexts(page))[4]).toContain("Done. <script>");
    await page.waitForFunction(() => document.querySelector("#final-state")?.textContent?.includes("finished"));
    expect(await page.evaluate(() => (window as { __pwned?: number }).__pwned)).toBeUndefined();

    // A follow-up from the box is stored as the user's message (the page's write carries X-Tern-Page).
    await page.type("#message", "Now add tests");
    await page.click("#follow-up button[type=submit]");
    await page.waitForFunction(() =>
      Array.from(document.querySelectorAll("#events article")).some((e) => e.textContent?.includes("Now add tests")),
    );
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: new URL("conversation-page.png", ARTIFACTS).pathname, fullPage: true });
    await context.close();
  });

  it("shows the agent's current plan: the task list of the latest task_tracker result, kept as text", async () => {
    const { conversationId } = await createConversationFixture(db(), { userId });
    const planResult = (n: number, tasks: { title: string; notes: string; status: string }[]) =>
      newEvent.observation({
        tool_name: "task_tracker",
        tool_call_id: `plan-${n}`,
        action_id: `00000000-0000-4000-8000-00000000000${n}`,
        observation: {
          kind: "TaskTrackerObservation",
          command: "plan",
          task_list: tasks,
          content: [{ type: "text", text: `The task list now has ${tasks.length} task(s)` }],
          is_error: false,
        },
      });
    await eventsRepository(db()).append(conversationId, [
      planResult(1, [
        { title: "Read the code", notes: "", status: "in_progress" },
        { title: `Fix it ${XSS}`, notes: "carefully", status: "todo" },
      ]),
    ]);
    const context = await browser.createBrowserContext();
    const page = await context.newPage();
    await signIn(page, `${t.url()}/conversations/${toHexId(conversationId)}`, key);
    const plan = () =>
      page.$$eval("#plan-tasks li", (els) => els.map((e) => [e.getAttribute("data-status"), e.textContent ?? ""]));
    await page.waitForSelector("#plan:not([hidden])");
    expect(await plan()).toEqual([
      ["in_progress", "◐Read the code"],
      ["todo", `☐Fix it ${XSS}carefully`],
    ]);
    expect(await page.$eval("#plan", (e) => e.querySelector("script, img") === null)).toBe(true);

    // A new plan replaces the old one live; a failed call leaves it as it is.
    await eventsRepository(db()).append(conversationId, [
      planResult(2, [
        { title: "Read the code", notes: "", status: "done" },
        { title: "Fix it", notes: "", status: "done" },
        { title: "Run the tests", notes: "", status: "in_progress" },
      ]),
      newEvent.observation({
        tool_name: "task_tracker",
        tool_call_id: "plan-3",
        action_id: "00000000-0000-4000-8000-000000000003",
        observation: { kind: "TaskTrackerObservation", command: "plan", task_list: [], content: [], is_error: true },
      }),
    ]);
    await page.waitForFunction(() => document.querySelectorAll("#plan-tasks li").length === 3);
    await page.waitForFunction(() => document.querySelectorAll("#events article").length === 3);
    expect(await plan()).toEqual([
      ["done", "☑Read the code"],
      ["done", "☑Fix it"],
      ["in_progress", "◐Run the tests"],
    ]);
    expect(await page.evaluate(() => (window as { __pwned?: number }).__pwned)).toBeUndefined();
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: new URL("conversation-page-plan.png", ARTIFACTS).pathname, fullPage: true });
    await context.close();
  }, 60_000);

  it("a conversation's read-only key opens it read-only", async () => {
    const { conversationId } = await createConversationFixture(db(), { userId });
    const readOnlyKey = await readOnlyKeyOf({ db: db() }, conversationId);
    await eventsRepository(db()).append(conversationId, [sampleEvent("MessageEvent", 1)]);
    const context = await browser.createBrowserContext();
    const page = await context.newPage();
    await signIn(page, `${t.url()}/conversations/${toHexId(conversationId)}`, readOnlyKey);
    await page.waitForFunction(() => document.querySelectorAll("#events article").length === 1);
    expect(await page.$eval("#follow-up", (e) => (e as HTMLElement).hidden)).toBe(true);
    expect(await page.$eval("#read-only", (e) => (e as HTMLElement).hidden)).toBe(false);
    // And the API holds it to that: its cookie cannot send a message.
    const status = await page.evaluate(async (id) => {
      const res = await fetch(`/api/v1/conversation/${id}/events`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-tern-page": "1" },
        body: JSON.stringify({ content: [{ type: "text", text: "hi" }] }),
      });
      return res.status;
    }, toHexId(conversationId));
    expect(status).toBe(401);
    await context.close();
  });

  it("refuses a cookie write without X-Tern-Page, a forged cookie, and a wrong key", async () => {
    const { conversationId } = await createConversationFixture(db(), { userId });
    const signin = await fetch(`${t.url()}/conversations/session`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ key }),
    });
    expect(signin.status).toBe(200);
    const cookie = (signin.headers.get("set-cookie") ?? "").split(";")[0] as string;
    expect(signin.headers.get("set-cookie")).toMatch(/HttpOnly/i);
    expect(signin.headers.get("set-cookie")).toMatch(/SameSite=Strict/i);
    const post = (headers: Record<string, string>) =>
      fetch(`${t.url()}/api/v1/conversation/${toHexId(conversationId)}/events`, {
        method: "POST",
        headers: { "content-type": "application/json", cookie, ...headers },
        body: JSON.stringify({ content: [{ type: "text", text: "hi" }] }),
      });
    expect((await post({})).status).toBe(403);
    expect((await post({ "x-tern-page": "1" })).status).toBe(200);
    const forged = await fetch(`${t.url()}/api/v1/app-conversations?ids=${toHexId(conversationId)}`, {
      headers: { cookie: `${cookie.slice(0, -4)}AAAA` },
    });
    expect(forged.status).toBe(401);
    const wrong = await fetch(`${t.url()}/conversations/session`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ key: "tern_nope" }),
    });
    expect(wrong.status).toBe(401);
  });
});
