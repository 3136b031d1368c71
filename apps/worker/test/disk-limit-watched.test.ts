import { enqueueAgentRun, liveWorkers } from "@tern/queue";
import { kindsOf, waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentFixture, createAgentFixture } from "./agent-fixture.ts";

// The watched disk limit on the main engine (overlay2 over ext4, which cannot hold StorageOpt
// size): a worker with SANDBOX_DISK_ENFORCE on starts anyway, says the limit is watched, and an
// agent's command writing 12 GiB is stopped near the 1 GiB limit, its run ended with the reason,
// while a neighbour sandbox keeps working. The limit is small so the overshoot stays small, and
// the sandbox (with what it wrote) is removed at the end.

const LIMIT_MB = 1024;
const MiB = 1024 * 1024;

let fx: AgentFixture;

beforeAll(async () => {
  fx = await createAgentFixture();
});

afterAll(async () => {
  // Its worker is killed (fx.close): its run's command is frozen with the sandbox, and would hold a graceful stop.
  await fx?.close();
});

describe("a disk limit the worker holds itself (watched)", () => {
  it("stops a sandbox writing 12 GiB near its limit, ends its run with the reason, and leaves its neighbour working", async () => {
    const filler = await fx.newConversation({ message: "Fill the disk." });
    const neighbour = await fx.newConversation({ message: "Stay calm." });
    fx.llm.push(
      {
        toolCalls: [
          {
            name: "terminal",
            arguments: {
              command:
                "for i in $(seq 1 12); do dd if=/dev/zero of=fill-$i bs=1M count=1024 status=none || break; done; echo wrote",
              timeout: 600,
            },
          },
        ],
      },
      { text: "Filled." },
    );
    const worker = await fx.startWorker({
      ...fx.env("openai"),
      LOG_LEVEL: "info",
      SANDBOX_POOL_SIZE: "0",
      SANDBOX_DISK_ENFORCE: "true",
      SANDBOX_DISK_MB: String(LIMIT_MB),
    });
    const ready = JSON.parse(
      (await waitFor(
        () =>
          worker
            ?.output()
            .split("\n")
            .find((l) => l.includes('"msg":"worker ready"')),
        { what: "the worker's 'worker ready' log line", timeoutMs: 10_000 },
      )) ?? "{}",
    );
    expect(ready).toMatchObject({ disk_mode: "watched", disk: expect.stringMatching(/1024 MB watched \(overlay2/) });

    const began = performance.now();
    await enqueueAgentRun(fx.queues, filler.conversationId);
    const conversation = await waitFor(
      async () => {
        const c = await fx.conversation(filler.conversationId);
        return c.executionStatus === "error" && c;
      },
      { what: "the filling run to be ended", timeoutMs: 180_000 },
    );
    const stoppedAfterMs = Math.round(performance.now() - began);
    expect(conversation.executionStatus).toBe("error");

    // Stopped from writing: paused, with what it wrote bounded near the limit.
    expect((await fx.sandboxes.inspect(filler.sandboxRef))?.state).toBe("paused");
    const written = (await fx.sandboxes.writtenBytes?.(filler.sandboxRef)) ?? -1;
    expect(written).toBeGreaterThanOrEqual(LIMIT_MB * MiB);
    expect(written).toBeLessThan(3 * LIMIT_MB * MiB);
    const later = (await fx.sandboxes.writtenBytes?.(filler.sandboxRef)) ?? -1;
    expect(later).toBe(written);

    // The conversation keeps its events, and the last says why, with the limit and the size.
    const events = await fx.events(filler.conversationId);
    expect(kindsOf(events)).toEqual(["SystemPromptEvent", "MessageEvent", "ActionEvent", "AgentErrorEvent"]);
    const error = String(events.find((e) => e.kind === "AgentErrorEvent")?.payload.error);
    expect(error).toMatch(/limit of 1024 MB \(SANDBOX_DISK_MB\)/);
    // The size once frozen, not the sample that found it past the limit.
    expect(error).toContain(`wrote ${(written / 1024 / MiB).toFixed(2)} GiB`);

    // The neighbour was never touched: it runs, and its commands answer.
    expect((await fx.sandboxes.inspect(neighbour.sandboxRef))?.state).toBe("running");
    expect(
      await fx.exec(
        neighbour.sandboxRef,
        "echo alive; dd if=/dev/zero of=mine bs=1M count=16 status=none && echo wrote",
      ),
    ).toBe("alive\nwrote\n");

    // The worker says so: /ready and /metrics name the mode in force.
    const [endpoint] = await liveWorkers(fx.redis, fx.prefix);
    expect(endpoint).toMatchObject({ diskLimit: "watched" });
    const readyBody = (await (await fetch(`${endpoint?.url}/ready`)).json()) as { containment: unknown };
    expect(readyBody.containment).toMatchObject({ disk: { mode: "watched", limitMb: LIMIT_MB } });
    const metrics = await (await fetch(`${endpoint?.url}/metrics`)).text();
    expect(metrics).toMatch(/tern_sandbox_disk_limit_mode\{mode="watched"\} 1/);
    expect(metrics).toMatch(/tern_sandbox_disk_limit_stops_total 1/);

    console.info(
      `watched disk limit: a 12 GiB fill stopped at ${(written / MiB).toFixed(0)} MiB of a ${LIMIT_MB} MB limit, ` +
        `${stoppedAfterMs} ms after the run was enqueued; ${error}`,
    );
    await fx.sandboxes.destroy(filler.sandboxRef);
  }, 300_000);
});
