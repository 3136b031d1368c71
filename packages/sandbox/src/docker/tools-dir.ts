import { createHash } from "node:crypto";
import { posix } from "node:path";
import { Readable } from "node:stream";
import type Docker from "dockerode";
import tar from "tar-stream";
import { confinedLoader, interpreterOf, isElf, neededLibraries, withInterpreter, withPaths } from "./elf.ts";

/**
 * tern's tools, in one directory of their own that any image can carry: bash, coreutils and the
 * few programs the tools' scripts call, tmux (the terminal), python3 with its standard library (the
 * file editor), git (the workspace's setup). Their programs name the directory's own loader, and
 * that loader looks for libraries in the directory only: nothing of the image they land in is used.
 */
export const TOOLS_DIR = "/opt/tern";
const BIN = `${TOOLS_DIR}/bin`;
const LIB = `${TOOLS_DIR}/lib`;
/** The loader the copied programs name: no longer than any glibc loader path, so it is written in place. */
const LOADER = `${LIB}/ld.so`;
/**
 * The C library's locales (tmux needs C.UTF-8, which glibc does not build in): its compiled-in
 * /usr/lib/locale is rewritten to this path of the same length.
 */
const LOCALES = `${TOOLS_DIR}/local`;
/** Where its gconv modules would be: nowhere (a C library never loads another's). */
const NO_GCONV = `${TOOLS_DIR}/no-gconv`;

/** ncurses' compiled-in terminfo search, and the tools' own directory it is rewritten to (one entry, slashes before it). */
const TERMINFO_SEARCH = "/etc/terminfo:/lib/terminfo:/usr/share/terminfo";
const TERMINFO = `${TOOLS_DIR}/terminfo`;

/** Changes when what the directory holds, or how, changes: every runtime image is made again. */
const TOOLS_LAYOUT = "1";

/** The Debian packages whose programs (under bin/) the tools need. */
const TOOL_PACKAGES = ["bash", "coreutils", "findutils", "grep", "sed", "tar", "gzip", "tmux", "git", "procps"];
/** Where the default image keeps libraries, searched in this order. */
const LIB_DIRS = [
  "/usr/lib/x86_64-linux-gnu",
  "/lib/x86_64-linux-gnu",
  "/usr/lib/aarch64-linux-gnu",
  "/lib/aarch64-linux-gnu",
  "/usr/lib64",
  "/lib64",
  "/usr/lib",
  "/lib",
];
/** Parts of the Python standard library no tool uses: left out. */
const PYTHON_LEFT_OUT = /^(test|idlelib|tkinter|turtledemo|ensurepip|lib2to3|pydoc_data|config-[^/]*)(\/|$)/;

/** The label that marks the tools' image, with its version. */
export const ToolsLabel = { Version: "tern.tools.version" } as const;

/** The version of the tools a default image gives: its id and the layout. */
export const toolsVersionOf = (defaultImageId: string): string =>
  createHash("sha256").update(`${TOOLS_LAYOUT}\0${defaultImageId}`).digest("hex").slice(0, 16);

interface TarFile {
  type: "file" | "symlink" | "directory";
  /** Read only for the files asked for. */
  content?: Buffer;
  linkname?: string;
  mode: number;
}

/**
 * Every entry of a tar stream by its name (no leading slash): symlinks and directories always, file
 * contents only where `wanted` says (the rest are known to exist).
 */
const readTar = async (
  stream: NodeJS.ReadableStream,
  wanted: (name: string) => boolean,
): Promise<Map<string, TarFile>> => {
  const out = new Map<string, TarFile>();
  const extract = tar.extract();
  extract.on("entry", (h, s, next) => {
    const name = h.name.replace(/^\.?\/+/, "").replace(/\/$/, "");
    const type = h.type === "symlink" ? "symlink" : h.type === "directory" ? "directory" : "file";
    const keep = type === "file" && wanted(name);
    const chunks: Buffer[] = [];
    s.on("data", (c) => {
      if (keep) chunks.push(c as Buffer);
    });
    s.on("end", () => {
      out.set(name, {
        type,
        mode: h.mode ?? 0o644,
        ...(keep ? { content: Buffer.concat(chunks) } : {}),
        ...(h.linkname ? { linkname: h.linkname } : {}),
      });
      next();
    });
    s.resume();
  });
  const done = new Promise<void>((resolve, reject) => {
    extract.on("finish", resolve);
    extract.on("error", reject);
  });
  (stream instanceof Readable ? stream : Readable.from(stream as AsyncIterable<Buffer>)).pipe(extract);
  await done;
  return out;
};

/** A filesystem read from an export: paths resolved through its symlinks, as the kernel would. */
class ExportedFs {
  constructor(private readonly entries: Map<string, TarFile>) {}

  /** The entry's own name once every symlink on the way (and, with `follow`, the last) is resolved. */
  resolve(path: string, follow = true): string | null {
    let parts = path.split("/").filter((p) => p && p !== ".");
    let done: string[] = [];
    for (let hops = 0; parts.length > 0 && hops < 40; ) {
      const part = parts.shift() as string;
      if (part === "..") {
        done.pop();
        continue;
      }
      const here = [...done, part].join("/");
      const e = this.entries.get(here);
      if (e?.type === "symlink" && e.linkname && (follow || parts.length > 0)) {
        hops++;
        const target = e.linkname.split("/").filter((p) => p && p !== ".");
        if (e.linkname.startsWith("/")) done = [];
        parts = [...target, ...parts];
        continue;
      }
      done.push(part);
    }
    return parts.length > 0 ? null : done.join("/");
  }

  get(path: string, follow = true): TarFile | null {
    const r = this.resolve(path, follow);
    return r === null ? null : (this.entries.get(r) ?? null);
  }

  /** A file's content (following symlinks); null when absent or not read. */
  read(path: string): Buffer | null {
    const e = this.get(path);
    return e?.type === "file" ? (e.content ?? null) : null;
  }

  /** The entries under a directory (resolved), relative to it. */
  under(dir: string): [string, TarFile][] {
    const r = this.resolve(dir);
    if (r === null) return [];
    const prefix = `${r}/`;
    return [...this.entries].filter(([n]) => n.startsWith(prefix)).map(([n, e]) => [n.slice(prefix.length), e]);
  }
}

export interface ToolsTree {
  /** Paths relative to TOOLS_DIR. */
  files: Map<string, { content: Buffer; mode: number }>;
  symlinks: Map<string, string>;
}

/** Files of the default image the tools may need, read in the one pass of its export. */
const wantedFile = (name: string): boolean =>
  /^var\/lib\/dpkg\/info\/[^/]+\.list$/.test(name) ||
  /^(usr\/)?bin\/[^/]+$/.test(name) ||
  /^(usr\/)?lib(64)?\/([^/]+-linux-gnu\/)?(ld-linux|lib)[^/]*\.so[^/]*$/.test(name) ||
  /^(usr\/)?lib\/python3\.\d+\//.test(name) ||
  /^(usr\/)?lib\/locale\/C\.utf8\//.test(name) ||
  /^(usr\/share|(usr\/)?lib)\/terminfo\/[a-z]\/(screen|tmux|dumb|xterm)(-256color)?$/.test(name);

/**
 * The tools' directory made from the default image's files: read in one pass of the export of a
 * container that is created, never started.
 */
export const collectTools = async (
  docker: Docker,
  defaultImage: string,
  log: (line: string) => void = () => undefined,
): Promise<ToolsTree> => {
  const c = await docker.createContainer({ Image: defaultImage, Cmd: ["true"], NetworkDisabled: true });
  let fs: ExportedFs;
  try {
    fs = new ExportedFs(await readTar(await c.export(), wantedFile));
  } finally {
    await c.remove({ force: true }).catch(() => undefined);
  }
  const files: ToolsTree["files"] = new Map();
  const symlinks: ToolsTree["symlinks"] = new Map();
  const needed = new Set<string>();
  let loaderPath: string | null = null;

  const addProgram = (name: string, content: Buffer) => {
    const interp = interpreterOf(content);
    if (interp) loaderPath ??= interp;
    for (const lib of neededLibraries(content)) needed.add(lib);
    files.set(`bin/${name}`, { content: interp ? withInterpreter(content, LOADER) : content, mode: 0o755 });
  };

  // The packages' programs: each ELF file under a bin directory (scripts are left: they need a shell of the image's).
  let pythonVersion: string | null = null;
  for (const pkg of [...TOOL_PACKAGES, "python3-minimal"]) {
    const list = [`${pkg}.list`, `${pkg}:amd64.list`, `${pkg}:arm64.list`]
      .map((n) => fs.read(`/var/lib/dpkg/info/${n}`))
      .find((b) => b !== null);
    if (!list) throw new Error(`the default image has no package ${pkg}`);
    for (const path of list.toString("utf8").split("\n")) {
      if (!/^\/(usr\/)?bin\/[^/]+$/.test(path)) continue;
      const name = posix.basename(path);
      const entry = fs.get(path, false);
      if (entry?.type === "symlink" && entry.linkname) {
        symlinks.set(`bin/${name}`, posix.basename(entry.linkname));
        const m = /^python(3\.\d+)$/.exec(posix.basename(entry.linkname));
        if (name === "python3" && m) pythonVersion = m[1] ?? null;
      } else if (entry?.type === "file" && entry.content && isElf(entry.content)) {
        addProgram(name, entry.content);
      }
    }
  }
  if (!pythonVersion) throw new Error("the default image's python3 names no python3.X");
  const python = fs.read(`/usr/bin/python${pythonVersion}`);
  if (!python) throw new Error(`the default image has no /usr/bin/python${pythonVersion}`);
  addProgram(`python${pythonVersion}`, python);
  // Symlinks whose target is not kept would dangle: left out.
  for (const [link, target] of symlinks) if (!files.has(`bin/${target}`)) symlinks.delete(link);
  // The shell scripts call `sh`: bash is one.
  if (!files.has("bin/sh") && !symlinks.has("bin/sh")) symlinks.set("bin/sh", "bash");

  // Python's standard library, beside the program as Python looks for it (prefix = TOOLS_DIR).
  for (const [rel, f] of fs.under(`/usr/lib/python${pythonVersion}`)) {
    if (PYTHON_LEFT_OUT.test(rel)) continue;
    const to = `lib/python${pythonVersion}/${rel}`;
    if (f.type === "file" && f.content) {
      if (rel.endsWith(".so") && isElf(f.content)) for (const lib of neededLibraries(f.content)) needed.add(lib);
      files.set(to, { content: f.content, mode: f.mode & 0o777 });
    } else if (f.type === "symlink" && f.linkname) {
      symlinks.set(to, f.linkname);
    }
  }
  log(`programs: ${[...files.keys()].filter((k) => k.startsWith("bin/")).length}, python ${pythonVersion}`);

  // The libraries, each found once, with the ones they need in turn.
  const seen = new Set<string>();
  const queue = [...needed];
  while (queue.length > 0) {
    const name = queue.shift() as string;
    if (seen.has(name)) continue;
    seen.add(name);
    const content = LIB_DIRS.map((dir) => fs.read(`${dir}/${name}`)).find((b) => b !== null);
    if (!content) {
      // Only a standard-library module that no tool imports can need a library the image lacks.
      log(`library ${name} not found in the default image: left out`);
      continue;
    }
    const kept = name.startsWith("libc.so.")
      ? withPaths(content, [
          ["/usr/lib/locale", LOCALES],
          ["/usr/lib/x86_64-linux-gnu/gconv", NO_GCONV.padEnd(31, "_")],
          ["/usr/lib/aarch64-linux-gnu/gconv", NO_GCONV.padEnd(32, "_")],
        ])
      : name.startsWith("libtinfo.so.")
        ? withPaths(content, [
            [TERMINFO_SEARCH, `${"/".repeat(TERMINFO_SEARCH.length - TERMINFO.length + 1)}${TERMINFO.slice(1)}`],
            ["\0/etc/terminfo\0", `\0/${".".repeat(11)}/\0`],
          ])
        : content;
    files.set(`lib/${name}`, { content: kept, mode: 0o755 });
    for (const lib of neededLibraries(content)) if (!seen.has(lib)) queue.push(lib);
  }
  if (!loaderPath) throw new Error("the default image's programs name no loader");
  const loader = fs.read(loaderPath);
  if (!loader) throw new Error(`the default image has no loader ${loaderPath}`);
  files.set("lib/ld.so", { content: confinedLoader(loader, LIB), mode: 0o755 });
  // The loader's own name, for a library that names it (libc does).
  files.delete(`lib/${posix.basename(loaderPath)}`);
  symlinks.set(`lib/${posix.basename(loaderPath)}`, "ld.so");
  log(`libraries: ${seen.size}, loader ${loaderPath}`);

  // The C.UTF-8 locale, where the C library now looks.
  for (const [rel, f] of fs.under("/usr/lib/locale/C.utf8")) {
    if (f.type === "file" && f.content) files.set(`local/C.utf8/${rel}`, { content: f.content, mode: 0o644 });
  }
  // The terminal's terminfo entries, where the tools' own programs look.
  for (const entry of [
    "s/screen",
    "t/tmux",
    "t/tmux-256color",
    "d/dumb",
    "x/xterm",
    "x/xterm-256color",
    "s/screen-256color",
  ]) {
    const content = ["/usr/share/terminfo", "/lib/terminfo"].map((d) => fs.read(`${d}/${entry}`)).find((b) => b);
    if (content) files.set(`terminfo/${entry}`, { content, mode: 0o644 });
  }
  return { files, symlinks };
};

/**
 * The tree as a tar rooted at `/` (entries `opt/tern/...`), owned by root and readable by everyone;
 * unpacked onto a container (putArchive) whose image may have no /opt.
 */
export const packTools = (tree: ToolsTree): NodeJS.ReadableStream => {
  const pack = tar.pack();
  const root = TOOLS_DIR.replace(/^\//, "");
  const mtime = new Date(0);
  const dirs = new Set<string>();
  const paths = [...tree.files.keys(), ...tree.symlinks.keys()];
  for (const p of paths) {
    for (let d = posix.dirname(`${root}/${p}`); d !== "."; d = posix.dirname(d)) dirs.add(d);
  }
  const owner = { uid: 0, gid: 0, mtime };
  // `opt` itself is left to the image (or made by the engine): only tern's own directories are named.
  for (const d of [...dirs].sort()) {
    if (d === "opt") continue;
    pack.entry({ name: `${d}/`, type: "directory", mode: 0o755, ...owner });
  }
  for (const [p, f] of [...tree.files].sort(([a], [b]) => a.localeCompare(b))) {
    pack.entry({ name: `${root}/${p}`, size: f.content.length, mode: f.mode | 0o444, ...owner }, f.content);
  }
  for (const [p, target] of tree.symlinks) {
    pack.entry({ name: `${root}/${p}`, type: "symlink", linkname: target, mode: 0o777, ...owner });
  }
  pack.finalize();
  return pack as unknown as NodeJS.ReadableStream;
};

export const TOOLS_BIN = BIN;
