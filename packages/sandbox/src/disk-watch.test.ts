import { describe, expect, it } from "vitest";
import { nextSampleInMs, startDiskWatch } from "./disk-watch.ts";
import type { SandboxInfo } from "./driver.ts";

const GiB = 1024 ** 3;
const bounds = { minMs: 250, maxMs: 10_000 };

describe("the watched disk limit's sampling", () => {
  it("samples a sandbox sooner the closer it is to its limit, within bounds", () => {
    // 10 GiB of room at 1 GB/s: ~10.7 s to fill, sampled at half that, capped at 10 s.
    expect(nextSampleInMs(0, 10 * GiB, 1e9, bounds)).toBe(5368);
    expect(nextSampleInMs(9.9 * GiB, 10 * GiB, 1e9, bounds)).toBe(250);
    expect(nextSampleInMs(11 * GiB, 10 * GiB, 1e9, bounds)).toBe(250);
    expect(nextSampleInMs(0, 100 * GiB, 1e9, bounds)).toBe(10_000);
  });

  it("hands a sandbox past its limit to onOver once, and again once it ran again after a pause", async () => {
    const box: SandboxInfo = { ref: "c1", name: "s1", state: "running", labels: {}, createdAt: "" };
    let bytes = 0.5 * GiB;
    let samples = 0;
    const over: number[] = [];
    const watch = startDiskWatch({
      driver: {
        list: async () => [{ ...box }],
        writtenBytes: async () => {
          samples++;
          return bytes;
        },
      },
      labels: {},
      limitBytes: GiB,
      writeBytesPerSecond: 1e9,
      minIntervalMs: 10,
      listEveryMs: 0,
      onOver: async (_s, b) => {
        over.push(b);
        box.state = "paused";
      },
    });
    const until = async (what: () => boolean) => {
      const deadline = Date.now() + 5_000;
      while (!what() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(what()).toBe(true);
    };
    try {
      await until(() => samples >= 2);
      expect(over).toEqual([]);
      bytes = 1.2 * GiB;
      await until(() => over.length === 1);
      expect(over).toEqual([1.2 * GiB]);
      const after = samples;
      await new Promise((r) => setTimeout(r, 200));
      // Paused: not sampled, not stopped again.
      expect(samples).toBe(after);
      expect(over).toHaveLength(1);
      box.state = "running"; // resumed, still past the limit
      await until(() => over.length === 2);
    } finally {
      await watch.stop();
    }
  });
});
