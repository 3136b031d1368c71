import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { SandboxLabel, type SandboxRef } from "@tern/sandbox";
import { prepareTestSandboxes, testSandboxDriver } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { executeTool } from "../src/tools/execute.ts";

/**
 * Any image as a sandbox: a spec's base image gets tern's tools directory, the sandbox user and the
 * workspace (the driver's runtime image), and the agent's terminal and file editor run there on
 * nothing of the image's own. The images are made here from what the machine holds (an export of
 * the default image, and Debian's static busybox), never pulled.
 */
const defaultImage = process.env.SANDBOX_IMAGE ?? "tern-sandbox:latest";
const driver = testSandboxDriver();
const run = randomBytes(4).toString("hex");
const namespace = `terntest-anyimage-${run}`;
const strippedImage = `tern-test-stripped:${run}`;
const busyboxImage = `tern-test-busybox:${run}`;
const made: SandboxRef[] = [];
const runtimeImages: string[] = [];

const sh = (script: string, ...args: string[]) =>
  execFileSync("bash", ["-euo", "pipefail", "-c", script, "sh", ...args], { encoding: "utf8", maxBuffer: 1 << 26 });

/** The default image's files without python3 and tmux: exported, those removed, imported. */
const makeStrippedImage = () =>
  sh(
    `c=$(docker create "$1" true)
    trap 'docker rm -f "$c" >/dev/null' EXIT
    docker export "$c" | tar --delete --wildcards -f - 'usr/bin/python3*' 'usr/bin/tmux' 'usr/lib/python3*' |
      docker import - "$2" >/dev/null`,
    defaultImage,
    strippedImage,
  );

/** A scratch image holding only Debian's static busybox (busybox-static's /bin/busybox). */
const makeBusyboxImage = () =>
  sh(
    `d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
    mkdir "$d/bin" && cp /bin/busybox "$d/bin/busybox"
    tar -C "$d" -c bin | docker import - "$1" >/dev/null`,
    busyboxImage,
  );

const sandboxOf = async (spec: string): Promise<{ ref: SandboxRef; built: boolean }> => {
  const prepared = await driver.prepareRuntimeImage?.(spec, {
    toolsFrom: defaultImage,
    labels: { [SandboxLabel.Namespace]: namespace },
  });
  if (!prepared) throw new Error("the driver makes no runtime images");
  runtimeImages.push(prepared.image);
  const info = await driver.create({
    name: `${namespace}-${made.length}`,
    image: prepared.image,
    labels: { [SandboxLabel.Marker]: "1", [SandboxLabel.Namespace]: namespace },
    limits: { memoryMb: 512, cpus: 1, pids: 256 },
  });
  made.push(info.ref);
  return { ref: info.ref, built: prepared.built };
};

const ctx = (ref: SandboxRef, actionId: string) => ({
  sandbox: driver,
  sandboxRef: ref,
  workspaceDir: "/workspace",
  actionId,
  maxOutputBytes: 30_000,
});

beforeAll(async () => {
  if (!existsSync("/bin/busybox")) {
    throw new Error("/bin/busybox is missing: run scripts/lib/ensure-busybox.sh (Debian's busybox-static)");
  }
  await prepareTestSandboxes(driver);
  makeStrippedImage();
  makeBusyboxImage();
}, 600_000);

afterAll(async () => {
  await Promise.all(made.map((ref) => driver.destroy(ref).catch(() => undefined)));
  sh('docker rmi -f "$@" >/dev/null 2>&1 || true', ...new Set(runtimeImages), strippedImage, busyboxImage);
});

describe("a spec of any image", () => {
  it("a copy of the default image without python3 and tmux runs the terminal and the file editor", async () => {
    const { ref } = await sandboxOf(strippedImage);
    // The image's own have gone.
    const own = await driver.exec(ref, { cmd: ["bash", "-c", "ls /usr/bin/python3 /usr/bin/tmux 2>&1; true"] });
    expect(own.stdout).toMatch(/No such file[\s\S]*No such file/);

    const t1 = await executeTool(
      "terminal",
      { command: "export A=4; cd /tmp && echo hello $((A * 10))" },
      ctx(ref, `t1-${run}`),
    );
    expect(t1.text).toMatch(/^hello 40\n\[The command completed with exit code 0\.\]/);
    // The live shell kept its state: the tools' tmux holds it.
    const t2 = await executeTool("terminal", { command: "echo $A; pwd; id -un" }, ctx(ref, `t2-${run}`));
    expect(t2.text).toMatch(/^4\n\/tmp\nagent\n/);

    const created = await executeTool(
      "file_editor",
      { command: "create", path: "/workspace/notes.txt", file_text: "one\ntwo\n" },
      ctx(ref, `e1-${run}`),
    );
    expect(created.isError).toBe(false);
    const replaced = await executeTool(
      "file_editor",
      { command: "str_replace", path: "/workspace/notes.txt", old_str: "two", new_str: "three" },
      ctx(ref, `e2-${run}`),
    );
    expect(replaced.isError).toBe(false);
    const read = await executeTool("terminal", { command: "cat /workspace/notes.txt" }, ctx(ref, `t3-${run}`));
    expect(read.text).toMatch(/^one\nthree\n/);
  }, 600_000);

  it("a scratch image holding only busybox runs the terminal", async () => {
    const { ref } = await sandboxOf(busyboxImage);
    const t1 = await executeTool(
      "terminal",
      { command: "cd /workspace && echo made > f && ls -l f && busybox echo from-busybox" },
      ctx(ref, `b1-${run}`),
    );
    expect(t1.text).toMatch(/agent agent .* f\nfrom-busybox\n\[The command completed with exit code 0\.\]/);
    const t2 = await executeTool("terminal", { command: "cat f; pwd" }, ctx(ref, `b2-${run}`));
    expect(t2.text).toMatch(/^made\n\/workspace\n/);
  }, 600_000);

  it("is built once per base image: a second sandbox of the spec reuses it", async () => {
    const first = await driver.prepareRuntimeImage?.(busyboxImage, {
      toolsFrom: defaultImage,
      labels: { [SandboxLabel.Namespace]: namespace },
    });
    const second = await sandboxOf(busyboxImage);
    expect(second.built).toBe(false);
    expect(runtimeImages.at(-1)).toBe(first?.image);
  }, 600_000);
});
