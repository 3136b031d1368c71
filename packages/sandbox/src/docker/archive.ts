import { posix } from "node:path";
import { Readable } from "node:stream";
import tar from "tar-stream";
import type { FileToUpload } from "../driver.ts";

export interface ArchiveOwner {
  uid: number;
  gid: number;
}

/** Normalised relative path; refuses absolute paths and `..` so an upload stays under its directory. */
const safeRelative = (p: string): string => {
  const n = posix.normalize(p).replace(/^\.\/+/, "");
  if (n === "" || n === "." || posix.isAbsolute(n) || n === ".." || n.startsWith("../")) {
    throw new Error(`invalid path in upload: ${p}`);
  }
  return n;
};

/** A tar of `files` (with their parent directories), owned by `owner`, built in memory. */
export const packFiles = async (files: FileToUpload[], owner: ArchiveOwner): Promise<Buffer> => {
  const pack = tar.pack();
  const dirs = new Set<string>();
  const entries: { name: string; content: Buffer; mode: number }[] = [];
  for (const f of files) {
    const name = safeRelative(f.path);
    for (let d = posix.dirname(name); d !== "."; d = posix.dirname(d)) dirs.add(d);
    entries.push({
      name,
      content: Buffer.isBuffer(f.content) ? f.content : Buffer.from(f.content),
      mode: f.mode ?? 0o644,
    });
  }
  const chunks: Buffer[] = [];
  const done = new Promise<void>((resolve, reject) => {
    pack.on("data", (c) => chunks.push(c as Buffer));
    pack.on("end", resolve);
    pack.on("error", reject);
  });
  const mtime = new Date();
  for (const d of [...dirs].sort()) {
    pack.entry({ name: `${d}/`, type: "directory", mode: 0o755, uid: owner.uid, gid: owner.gid, mtime });
  }
  for (const e of entries) {
    pack.entry(
      { name: e.name, size: e.content.length, mode: e.mode, uid: owner.uid, gid: owner.gid, mtime },
      e.content,
    );
  }
  pack.finalize();
  await done;
  return Buffer.concat(chunks);
};

/** The content of the first regular file in a tar stream; null when the archive holds none. */
export const firstFileOf = async (archive: NodeJS.ReadableStream, maxBytes: number): Promise<Buffer | null> => {
  const extract = tar.extract();
  let found: Buffer | null = null;
  let tooLarge = false;
  extract.on("entry", (header, stream, next) => {
    if (found !== null || header.type !== "file") {
      stream.on("end", next);
      stream.resume();
      return;
    }
    if ((header.size ?? 0) > maxBytes) tooLarge = true;
    const chunks: Buffer[] = [];
    stream.on("data", (c) => {
      if (!tooLarge) chunks.push(c as Buffer);
    });
    stream.on("end", () => {
      found = Buffer.concat(chunks);
      next();
    });
  });
  const finished = new Promise<void>((resolve, reject) => {
    extract.on("finish", resolve);
    extract.on("error", reject);
  });
  (archive instanceof Readable ? archive : Readable.from(archive as AsyncIterable<Buffer>)).pipe(extract);
  await finished;
  if (tooLarge) throw new Error(`file larger than ${maxBytes} bytes`);
  return found;
};
