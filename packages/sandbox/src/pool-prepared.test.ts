import { describe, expect, it } from "vitest";
import type { ExecOptions, SandboxDriver, SandboxInfo, SandboxSpec } from "./driver.ts";
import { createSandboxPool } from "./pool.ts";

/** An engine in memory that records each create's image and each exec; `missing` images fail to create. */
const recordingDriver = (missing: Set<string>) => {
  const creates: string[] = [];
  const execs: string[] = [];
  const live = new Map<string, SandboxInfo>();
  const driver = {
    async create(spec: SandboxSpec) {
      creates.push(spec.image);
      if (missing.has(spec.image)) throw new Error(`No such image: ${spec.image}`);
      const info = {
        ref: spec.name,
        name: spec.name,
        image: spec.image,
        state: "running",
        labels: spec.labels ?? {},
        createdAt: new Date().toISOString(),
      } as SandboxInfo;
      live.set(spec.name, info);
      return info;
    },
    async exec(ref: string, opts: ExecOptions) {
      execs.push(`${ref}: ${opts.cmd.join(" ")}`);
      return { exitCode: 0, stdout: "", stderr: "", truncated: false };
    },
    async destroy(ref: string) {
      live.delete(ref);
    },
    async list() {
      return [...live.values()];
    },
  } as unknown as SandboxDriver;
  return { driver, creates, execs };
};

const spec = { image: "sandbox:latest", limits: { memoryMb: 256, cpus: 0.5, pids: 64 } };
const prepare = { cmd: ["git", "init", "/workspace/empty"] };

describe("a pool with a prepared image", () => {
  it("makes its warm sandboxes from the prepared image and runs no warm-up exec in them", async () => {
    const engine = recordingDriver(new Set());
    const pool = createSandboxPool(engine.driver, {
      size: 2,
      namespace: "prepared",
      ownerId: "w",
      spec,
      prepare,
      preparedImage: () => "workspace:abc",
    });
    await pool.start();
    await pool.whenFull();
    expect(engine.creates).toEqual(["workspace:abc", "workspace:abc"]);
    expect(engine.execs).toEqual([]);
    await pool.stop();
  });

  it("before the prepared image exists, and when a create from it fails, runs the warm-up exec in the sandbox image", async () => {
    const engine = recordingDriver(new Set(["workspace:gone"]));
    let prepared: string | null = null;
    const failed: string[] = [];
    const pool = createSandboxPool(engine.driver, {
      size: 1,
      namespace: "prepared",
      ownerId: "w",
      spec,
      prepare,
      preparedImage: () => prepared,
      onPreparedImageFailed: (image) => {
        failed.push(image);
        prepared = null;
      },
    });
    await pool.start();
    await pool.whenFull();
    expect(engine.creates).toEqual(["sandbox:latest"]);
    expect(engine.execs).toHaveLength(1);
    // Removed underneath: the claim's refill falls back to the sandbox image and its warm-up.
    prepared = "workspace:gone";
    expect(await pool.claim({ taskId: "t", sandboxId: "s" })).not.toBeNull();
    await pool.whenFull();
    expect(engine.creates).toEqual(["sandbox:latest", "workspace:gone", "sandbox:latest"]);
    expect(engine.execs).toHaveLength(2);
    expect(failed).toEqual(["workspace:gone"]);
    await pool.stop();
  });
});
