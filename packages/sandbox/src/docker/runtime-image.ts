import { createHash } from "node:crypto";
import { posix } from "node:path";
import { PassThrough, Readable } from "node:stream";
import type Docker from "dockerode";
import tar from "tar-stream";
import type { RuntimeImageOptions, RuntimeImageResult } from "../driver.ts";
import { RuntimeImageError, RuntimeImageLabel } from "../driver.ts";
import { collectTools, packTools, TOOLS_BIN, TOOLS_DIR, ToolsLabel, toolsVersionOf } from "./tools-dir.ts";

const statusOf = (err: unknown): number | undefined => (err as { statusCode?: number }).statusCode;

const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const SANDBOX_UID = 1000;
const SANDBOX_GID = 1000;
const WORKSPACE = "/workspace";

/** The runtime image of a base image and a tools version: one tag, so a second build finds the first. */
const runtimeImageTag = (baseId: string, toolsVersion: string): string =>
  `tern-runtime:${createHash("sha256").update(`${baseId}\0${toolsVersion}`).digest("hex").slice(0, 20)}`;

const toolsImageTag = (version: string) => `tern-tools:${version}`;

const imageInfo = async (docker: Docker, image: string): Promise<Docker.ImageInspectInfo | null> => {
  try {
    return await docker.getImage(image).inspect();
  } catch (err) {
    if (statusOf(err) === 404) return null;
    throw err;
  }
};

/** Reads a small file of a container (not started); null when absent. */
const readSmall = async (c: Docker.Container, path: string): Promise<string | null> => {
  let stream: NodeJS.ReadableStream;
  try {
    stream = await c.getArchive({ path });
  } catch (err) {
    if (statusOf(err) === 404) return null;
    throw err;
  }
  let text: string | null = null;
  const extract = tar.extract();
  extract.on("entry", (h, s, next) => {
    const chunks: Buffer[] = [];
    s.on("data", (d) => chunks.push(d as Buffer));
    s.on("end", () => {
      if (text === null && h.type === "file") text = Buffer.concat(chunks).toString("utf8");
      next();
    });
  });
  const done = new Promise<void>((resolve, reject) => {
    extract.on("finish", resolve);
    extract.on("error", reject);
  });
  (stream instanceof Readable ? stream : Readable.from(stream as AsyncIterable<Buffer>)).pipe(extract);
  await done;
  return text;
};

const exists = async (c: Docker.Container, path: string): Promise<boolean> => {
  try {
    await c.infoArchive({ path });
    return true;
  } catch (err) {
    if (statusOf(err) === 404) return false;
    throw err;
  }
};

/** A tar stream with each entry's name under `prefix` (the tools' archive, as `/opt/tern` reads, made `opt/...`). */
const reroot = (stream: NodeJS.ReadableStream, prefix: string): Readable => {
  const extract = tar.extract();
  const pack = tar.pack();
  const out = new PassThrough();
  extract.on("entry", (h, s, next) => {
    const entry = pack.entry({ ...h, name: `${prefix}/${h.name}` }, (err) => (err ? out.destroy(err) : next()));
    s.pipe(entry);
  });
  extract.on("finish", () => pack.finalize());
  extract.on("error", (err) => out.destroy(err));
  pack.on("error", (err) => out.destroy(err));
  (stream instanceof Readable ? stream : Readable.from(stream as AsyncIterable<Buffer>)).pipe(extract);
  return pack.pipe(out);
};

/** The sandbox user's files: /etc/passwd and /etc/group with uid/gid 1000 added when the image has none. */
/** A tar's bytes, once it has all been written. */
const collect = async (pack: tar.Pack): Promise<Buffer> => {
  const chunks: Buffer[] = [];
  const done = new Promise<void>((resolve, reject) => {
    pack.on("data", (c) => chunks.push(c as Buffer));
    pack.on("end", resolve);
    pack.on("error", reject);
  });
  await done;
  return Buffer.concat(chunks);
};

const userArchive = async (
  passwd: string | null,
  group: string | null,
  shell: string,
): Promise<{ archive: Buffer | null; home: string }> => {
  const lines = (t: string | null) => (t ?? "").split("\n").filter((l) => l.trim() !== "");
  const users = lines(passwd);
  const groups = lines(group);
  const existing = users.map((l) => l.split(":")).find((f) => f[2] === String(SANDBOX_UID));
  const home = existing?.[5] || "/home/agent";
  const pack = tar.pack();
  const bytes = collect(pack);
  const mtime = new Date(0);
  const root = { uid: 0, gid: 0, mtime };
  let changed = false;
  if (!existing) {
    if (!users.some((l) => l.startsWith("root:"))) users.unshift(`root:x:0:0:root:/root:${shell}`);
    users.push(`agent:x:${SANDBOX_UID}:${SANDBOX_GID}:tern sandbox user:${home}:${shell}`);
    const body = Buffer.from(`${users.join("\n")}\n`);
    pack.entry({ name: "etc/passwd", size: body.length, mode: 0o644, ...root }, body);
    changed = true;
  }
  if (!groups.some((l) => l.split(":")[2] === String(SANDBOX_GID))) {
    if (!groups.some((l) => l.startsWith("root:"))) groups.unshift("root:x:0:");
    groups.push(`agent:x:${SANDBOX_GID}:`);
    const body = Buffer.from(`${groups.join("\n")}\n`);
    pack.entry({ name: "etc/group", size: body.length, mode: 0o644, ...root }, body);
    changed = true;
  }
  pack.finalize();
  const archive = await bytes;
  return { archive: changed ? archive : null, home };
};

/** The directories every sandbox needs, owned as the tools expect. */
const layoutArchive = (home: string, homeMissing: boolean): Promise<Buffer> => {
  const pack = tar.pack();
  const bytes = collect(pack);
  const mtime = new Date(0);
  pack.entry({ name: "tmp/", type: "directory", mode: 0o1777, uid: 0, gid: 0, mtime });
  pack.entry({ name: "workspace/", type: "directory", mode: 0o755, uid: SANDBOX_UID, gid: SANDBOX_GID, mtime });
  if (homeMissing) {
    pack.entry({
      name: `${home.replace(/^\/+/, "")}/`,
      type: "directory",
      mode: 0o755,
      uid: SANDBOX_UID,
      gid: SANDBOX_GID,
      mtime,
    });
  }
  pack.finalize();
  return bytes;
};

/**
 * Makes (or finds) the runtime image of `base`: the base image with tern's tools directory, the
 * sandbox user and the workspace, put onto a container created from it (never started) through the
 * engine's archive API, then committed. Nothing of the base image runs. Once per base image id and
 * tools version: a second call finds the first's image by its tag.
 */
export const prepareRuntimeImage = async (
  docker: Docker,
  base: string,
  opts: RuntimeImageOptions,
): Promise<RuntimeImageResult> => {
  const log = opts.log ?? (() => undefined);
  const step = async <T>(name: string, run: () => Promise<T>): Promise<T> => {
    const started = Date.now();
    log(`${name} …`);
    try {
      const v = await run();
      log(`${name}: done in ${Date.now() - started} ms`);
      return v;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      log(`${name}: failed: ${message}`);
      throw new RuntimeImageError(name, message);
    }
  };

  const baseInfo = await step("find the base image", async () => {
    const info = await imageInfo(docker, base);
    if (!info) throw new Error(`no image ${base} on this engine (it is never pulled by a start)`);
    return info;
  });
  const toolsFrom = await step("find the default image", async () => {
    const info = await imageInfo(docker, opts.toolsFrom);
    if (!info) throw new Error(`no image ${opts.toolsFrom} on this engine`);
    return info;
  });
  const toolsVersion = toolsVersionOf(toolsFrom.Id);
  const tag = runtimeImageTag(baseInfo.Id, toolsVersion);
  const found = await imageInfo(docker, tag);
  if (found) return { image: tag, built: false, baseId: baseInfo.Id, toolsVersion };

  log(`building ${tag} of ${base} (${baseInfo.Id}), tools ${toolsVersion}`);
  const toolsTag = toolsImageTag(toolsVersion);
  if (!(await imageInfo(docker, toolsTag))) {
    await step("build the tools directory", async () => {
      const tree = await collectTools(docker, opts.toolsFrom, log);
      const c = await docker.createContainer({ Image: opts.toolsFrom, Cmd: ["true"], NetworkDisabled: true });
      try {
        await c.putArchive(packTools(tree), { path: "/" });
        const [repo, t] = toolsTag.split(":") as [string, string];
        await c.commit({
          repo,
          tag: t,
          _body: { Labels: { ...opts.labels, [ToolsLabel.Version]: toolsVersion } },
        });
      } finally {
        await c.remove({ force: true }).catch(() => undefined);
      }
    });
  }

  const baseEnv = baseInfo.Config?.Env ?? [];
  const basePath = baseEnv.find((e) => e.startsWith("PATH="))?.slice(5) || DEFAULT_PATH;
  const build = await step("create the build container", () =>
    docker.createContainer({
      Image: base,
      // Never started: these only satisfy an image that names no command.
      Entrypoint: [`${TOOLS_BIN}/true`],
      Cmd: [],
      NetworkDisabled: true,
      Labels: opts.labels,
    }),
  );
  try {
    await step("copy the tools directory", async () => {
      const tools = await docker.createContainer({ Image: toolsTag, Cmd: ["true"], NetworkDisabled: true });
      try {
        const stream = await tools.getArchive({ path: TOOLS_DIR });
        await build.putArchive(reroot(stream, posix.dirname(TOOLS_DIR).replace(/^\//, "")), { path: "/" });
      } finally {
        await tools.remove({ force: true }).catch(() => undefined);
      }
    });
    const home = await step("add the sandbox user", async () => {
      const shell = (await exists(build, "/bin/bash")) ? "/bin/bash" : `${TOOLS_BIN}/bash`;
      const made = await userArchive(
        await readSmall(build, "/etc/passwd"),
        await readSmall(build, "/etc/group"),
        shell,
      );
      if (made.archive) await build.putArchive(made.archive, { path: "/" });
      await build.putArchive(await layoutArchive(made.home, !(await exists(build, made.home))), { path: "/" });
      return made.home;
    });
    const made = await step("commit the runtime image", async () => {
      const env = baseEnv.filter((e) => !e.startsWith("PATH=") && !e.startsWith("HOME="));
      const [repo, t] = tag.split(":") as [string, string];
      const labels = {
        ...baseInfo.Config?.Labels,
        ...opts.labels,
        [RuntimeImageLabel.Base]: baseInfo.Id,
        [RuntimeImageLabel.Tools]: toolsVersion,
      };
      return (await build.commit({
        repo,
        tag: t,
        pause: false,
        _body: {
          // The image's own programs first; the tools' only where the image has none.
          Env: [...env, `PATH=${basePath}:${TOOLS_BIN}`, `HOME=${home}`],
          User: `${SANDBOX_UID}:${SANDBOX_GID}`,
          WorkingDir: WORKSPACE,
          Entrypoint: [`${TOOLS_BIN}/sleep`],
          Cmd: ["infinity"],
          Labels: labels,
        },
      })) as { Id: string };
    });
    log(`runtime image ${tag} (${made.Id.slice(0, 19)})`);
    return { image: tag, built: true, baseId: baseInfo.Id, toolsVersion };
  } finally {
    await build.remove({ force: true }).catch(() => undefined);
  }
};
