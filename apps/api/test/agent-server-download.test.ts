import { toHexId } from "@tern/core";
import { conversationsRepository } from "@tern/db";
import { createSandboxedConversation, scaled, testSandboxDriver } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApi, type TestApi } from "./harness.ts";

/**
 * The agent server's file download reads as the sandbox user, never as root: a path checked to be
 * in the workspace and then swapped (a directory replaced by a symlink to /etc) must not read a
 * root-only file. The attack races the check: a process of the sandbox user swaps
 * /workspace/project/d between a directory holding a decoy and a symlink to /etc, where a
 * root-only canary of the same name sits, while the client downloads d/<name> again and again.
 * Its positive control: some downloads get the decoy (the race is run, the route serves).
 */
let api: TestApi;
let key: string;
let userId: string;
const driver = testSandboxDriver();
const CANARY = "ROOT-ONLY-CANARY-9f41c2";
const TRIES = 150;
const IN_FLIGHT = 6;

beforeAll(async () => {
  api = await startTestApi({ worker: true });
  ({ key, userId } = await api.newUser());
}, scaled(120_000));

afterAll(async () => api?.close());

describe("agent-server download", () => {
  it("never reads a root-only file through a path swapped after its check", { timeout: scaled(300_000) }, async () => {
    const { conversationId, sandboxRef } = await createSandboxedConversation({
      db: api.database.db,
      sandboxes: driver,
      namespace: api.prefix,
      userId,
      tools: [],
    });
    const sandboxId = (await conversationsRepository(api.database.db).get(conversationId))?.sandboxId ?? "";
    const root = await driver.exec(sandboxRef, {
      user: "0",
      cmd: ["sh", "-c", `printf '${CANARY}' > /etc/tern-canary && chmod 600 /etc/tern-canary`],
    });
    expect(root.exitCode, root.stderr).toBe(0);
    // The sandbox user's swapper, left running in the background.
    const swap = await driver.exec(sandboxRef, {
      cmd: [
        "sh",
        "-c",
        `cd /workspace/project && (while :; do rm -rf d; mkdir d; printf decoy > d/tern-canary; sleep 0.005; ` +
          `rm -rf d; ln -s /etc d; sleep 0.005; done) >/dev/null 2>&1 &`,
      ],
    });
    expect(swap.exitCode, swap.stderr).toBe(0);

    const answers = new Map<string, number>();
    let leaked = 0;
    const download = async () => {
      const res = await fetch(
        `${api.url}/agent/${toHexId(sandboxId)}/api/file/download?path=/workspace/project/d/tern-canary`,
        { headers: { authorization: `Bearer ${key}` } },
      );
      const text = await res.text();
      if (text.includes(CANARY)) leaked++;
      const label = `${res.status} ${res.status === 200 ? text : ((JSON.parse(text) as { detail?: string }).detail ?? "")}`;
      answers.set(label, (answers.get(label) ?? 0) + 1);
    };
    // A few downloads in flight at once, as an attacker would send them: each waits on its own
    // exec in the sandbox, so together they take a fraction of the time one after another does.
    for (let i = 0; i < TRIES; i += IN_FLIGHT) {
      await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, TRIES - i) }, download));
    }
    await driver
      .exec(sandboxRef, { cmd: ["sh", "-c", "pkill -f 'ln -s /etc d' ; pkill sh; true"] })
      .catch(() => undefined);
    console.log(
      `download race, ${TRIES} tries: ${JSON.stringify(Object.fromEntries(answers))}; canary read ${leaked} times`,
    );
    expect(leaked).toBe(0);
    expect(answers.get("200 decoy") ?? 0).toBeGreaterThan(0);
  });
});
