/**
 * Just enough of ELF (64-bit, little-endian: x86-64 and arm64 Linux) to move a dynamically linked
 * program into a directory of its own: which libraries it needs, and which loader it names.
 * tern's tools are copied out of the default image this way and run in any image (tools-dir.ts).
 */

const PT_LOAD = 1;
const PT_DYNAMIC = 2;
const PT_INTERP = 3;
const DT_NULL = 0n;
const DT_NEEDED = 1n;
const DT_STRTAB = 5n;

export const isElf = (b: Buffer): boolean =>
  b.length >= 64 && b[0] === 0x7f && b[1] === 0x45 && b[2] === 0x4c && b[3] === 0x46;

interface Segment {
  type: number;
  offset: number;
  vaddr: bigint;
  filesz: number;
}

const segmentsOf = (b: Buffer): Segment[] => {
  // ELFCLASS64, ELFDATA2LSB only: the engines tern runs on.
  if (b[4] !== 2 || b[5] !== 1) throw new Error("not a 64-bit little-endian ELF file");
  const phoff = Number(b.readBigUInt64LE(0x20));
  const phentsize = b.readUInt16LE(0x36);
  const phnum = b.readUInt16LE(0x38);
  const out: Segment[] = [];
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize;
    out.push({
      type: b.readUInt32LE(at),
      offset: Number(b.readBigUInt64LE(at + 8)),
      vaddr: b.readBigUInt64LE(at + 16),
      filesz: Number(b.readBigUInt64LE(at + 32)),
    });
  }
  return out;
};

const cString = (b: Buffer, at: number): string => {
  const end = b.indexOf(0, at);
  return b.toString("latin1", at, end < 0 ? b.length : end);
};

/** The loader a program names (PT_INTERP), or null (a library, or a static program). */
export const interpreterOf = (b: Buffer): string | null => {
  const seg = segmentsOf(b).find((s) => s.type === PT_INTERP);
  return seg ? cString(b, seg.offset) : null;
};

/** The libraries a program or library names (DT_NEEDED), in order. */
export const neededLibraries = (b: Buffer): string[] => {
  const segs = segmentsOf(b);
  const dyn = segs.find((s) => s.type === PT_DYNAMIC);
  if (!dyn) return [];
  const entries: [bigint, bigint][] = [];
  for (let at = dyn.offset; at + 16 <= dyn.offset + dyn.filesz; at += 16) {
    const tag = b.readBigInt64LE(at);
    if (tag === DT_NULL) break;
    entries.push([tag, b.readBigUInt64LE(at + 8)]);
  }
  const strtab = entries.find(([t]) => t === DT_STRTAB)?.[1];
  if (strtab === undefined) return [];
  // DT_STRTAB is an address: its place in the file is that of the loaded segment holding it.
  const load = segs.find((s) => s.type === PT_LOAD && strtab >= s.vaddr && strtab < s.vaddr + BigInt(s.filesz));
  if (!load) return [];
  const strtabOffset = load.offset + Number(strtab - load.vaddr);
  return entries.filter(([t]) => t === DT_NEEDED).map(([, v]) => cString(b, strtabOffset + Number(v)));
};

/**
 * The program, naming `loader` as its interpreter instead: written in place, so `loader` must be no
 * longer than the path it replaces (the rest of the field is zeroed).
 */
export const withInterpreter = (b: Buffer, loader: string): Buffer => {
  const seg = segmentsOf(b).find((s) => s.type === PT_INTERP);
  if (!seg) return b;
  if (loader.length + 1 > seg.filesz) throw new Error(`loader path ${loader} longer than the program's own`);
  const out = Buffer.from(b);
  out.fill(0, seg.offset, seg.offset + seg.filesz);
  out.write(loader, seg.offset, "latin1");
  return out;
};

/**
 * glibc's loader with its own search confined to `libDir`: every compiled-in path it looks in for
 * libraries (the multiarch and plain lib directories), its cache (/etc/ld.so.cache) and its preload
 * list (/etc/ld.so.preload) are rewritten in place, each to a path of the same length (a directory
 * padded with slashes, or one that does not exist), so the image's own libraries, cache and
 * preloads never mix with the tools'. Throws when the loader is not the glibc one expected.
 */
export const confinedLoader = (ld: Buffer, libDir: string): Buffer => {
  const out = Buffer.from(ld);
  const replaceAll = (from: string, to: (len: number) => string, need: boolean) => {
    const needle = Buffer.from(`${from}\0`, "latin1");
    let n = 0;
    for (let at = out.indexOf(needle); at >= 0; at = out.indexOf(needle, at + needle.length)) {
      // Only a string of its own (not the tail of a longer one).
      if (at > 0 && out[at - 1] !== 0) continue;
      const repl = to(from.length);
      if (repl.length !== from.length) throw new Error(`confinedLoader: ${repl} is not as long as ${from}`);
      out.write(repl, at, "latin1");
      n++;
    }
    if (need && n === 0) throw new Error(`the loader has no ${from}: not the glibc loader tern expects`);
  };
  const padded = (len: number) => {
    const dir = `${libDir.replace(/\/+$/, "")}/`;
    if (dir.length > len) throw new Error(`library directory ${libDir} too long for the loader`);
    return dir.replace(/\/$/, "/".repeat(len - dir.length + 1));
  };
  // A path of that length that no image holds: a directory named by a run of dots under libDir's root.
  const nowhere = (len: number) => `/${".".repeat(Math.max(0, len - 2))}/`.slice(0, len);
  for (const multiarch of ["x86_64-linux-gnu", "aarch64-linux-gnu"]) {
    replaceAll(`/lib/${multiarch}/`, padded, false);
    replaceAll(`/usr/lib/${multiarch}/`, padded, false);
  }
  replaceAll("/lib/", nowhere, false);
  replaceAll("/usr/lib/", nowhere, false);
  replaceAll("/lib64/", nowhere, false);
  replaceAll("/usr/lib64/", nowhere, false);
  replaceAll("/etc/ld.so.cache", (len) => `${libDir}/no-cache`.padEnd(len, "_").slice(0, len), true);
  replaceAll("/etc/ld.so.preload", (len) => `${libDir}/no-preload`.padEnd(len, "_").slice(0, len), true);
  return out;
};

/**
 * `b` with every occurrence of each `from` replaced by its `to` of the same length (compiled-in
 * paths of a library: glibc's locale and gconv directories).
 */
export const withPaths = (b: Buffer, replacements: [from: string, to: string][]): Buffer => {
  const out = Buffer.from(b);
  for (const [from, to] of replacements) {
    if (from.length !== to.length) throw new Error(`withPaths: ${to} is not as long as ${from}`);
    const needle = Buffer.from(from, "latin1");
    for (let at = out.indexOf(needle); at >= 0; at = out.indexOf(needle, at + needle.length)) {
      out.write(to, at, "latin1");
    }
  }
  return out;
};
