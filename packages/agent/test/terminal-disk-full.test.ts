import { randomUUID } from "node:crypto";
import { type StoredEventOf, textOfContent } from "@tern/core";
import { usersRepository } from "@tern/db";
import type { SandboxDriver } from "@tern/sandbox";
import {
  createSandboxedConversation,
  engineSandboxDriver,
  ensureTestEngine,
  fixtureWorkspaceDir as workspaceDir,
} from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runAgent } from "../src/loop.ts";
import { systemPromptTools } from "../src/tools/definitions.ts";
import { createRunFixture, type RunFixture } from "./run-fixture.ts";

/**
 * A sandbox whose workspace disk is full: the terminal keeps its own state (programs, output, exit
 * status) on a tmpfs outside the limit, so the agent reads `No space left on device` (or `Disk
 * quota exceeded`) and can `rm` its way out. On an engine whose data root holds a disk limit
 * (ensureTestEngine: XFS project quotas).
 */
/** Above the sandbox image's own 718 MB: on a btrfs data root the image's files count against the limit. */
const DISK_MB = 1024;
let fx: RunFixture;
let driver: SandboxDriver;
const namespace = `terntest-termdisk-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  fx = await createRunFixture();
  const host = await ensureTestEngine(2);
  driver = engineSandboxDriver(host, namespace, { diskMb: DISK_MB });
  await driver.prepare();
}, 15 * 60_000);

afterAll(async () => {
  for (const c of (await driver?.list({ "tern.namespace": namespace })) ?? []) await driver.destroy(c.ref);
  await fx?.close();
});

const terminal = (command: string) => ({ toolCalls: [{ name: "terminal", arguments: { command } }] });

describe("the terminal on a full disk", () => {
  it("reports the full disk, then `rm` of the file and `echo` both return their results", async () => {
    const user = await usersRepository(fx.database.db).create();
    const { conversationId } = await createSandboxedConversation(
      { db: fx.database.db, sandboxes: driver, namespace, userId: user.id, tools: systemPromptTools() },
      { message: "Fill the disk, then clean up." },
    );
    fx.llm.push(
      terminal(`dd if=/dev/zero of=${workspaceDir}/fill bs=1M count=${DISK_MB * 4}`),
      terminal(`rm ${workspaceDir}/fill && echo removed`),
      terminal("echo still-here"),
      { text: "Cleaned up." },
    );
    const deps = fx.depsFor("openai");
    const outcome = await runAgent({ ...deps, sandboxes: driver }, conversationId, randomUUID());
    expect(outcome).toEqual({ outcome: "ended", status: "finished" });

    const observations = (await fx.events(conversationId))
      .filter((e): e is StoredEventOf<"ObservationEvent"> => e.kind === "ObservationEvent")
      .map((e) => e.payload.observation);
    expect(observations).toHaveLength(3);
    expect(observations[0]).toMatchObject({ status: "completed", exit_code: 1 });
    expect(textOfContent(observations[0]?.content ?? [])).toMatch(/No space left on device|Disk quota exceeded/);
    expect(observations[1]).toMatchObject({ status: "completed", exit_code: 0 });
    expect(textOfContent(observations[1]?.content ?? [])).toMatch(/^removed\n/);
    expect(textOfContent(observations[2]?.content ?? [])).toMatch(/^still-here\n/);
  }, 300_000);
});
