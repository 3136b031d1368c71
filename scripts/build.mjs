// Compiles every app and package (src/**/*.ts, tests left out) to JavaScript in its dist/, one file
// per source file, so production runs plain `node` with no TypeScript loader. Types are checked by
// `pnpm typecheck` (tsc); this is TypeScript's own per-file emit (every package is isolatedModules),
// with relative `.ts` imports rewritten to `.js`. Non-TypeScript files under src/ (scripts shipped
// into sandboxes) are copied beside. A package's exports resolve to dist/ under the `tern-dist`
// condition (`node --conditions=tern-dist`), and to src/ otherwise (tests, tsx, editors).
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const compilerOptions = {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.ESNext,
  verbatimModuleSyntax: true,
  rewriteRelativeImportExtensions: true,
  sourceMap: true,
};

const walk = (dir) =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? walk(path) : [path];
  });

const isTest = (path) => /\.test\.ts$/.test(path) || path.includes(`${"/"}__tests__/`);

/** Writes `content` to `path` unless it already holds it; a new file appears whole (write, then rename). */
const put = (path, content, written) => {
  written.add(path);
  if (existsSync(path) && readFileSync(path).equals(Buffer.from(content))) {
    // Up to date as of now, so the next build skips its source (below) until that changes again.
    const now = new Date();
    utimesSync(path, now, now);
    return false;
  }
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, content);
  renameSync(tmp, path);
  return true;
};

// dist/ is rewritten in place, never removed first: processes running from it (a test file's
// services while another test process builds) always find whole files, and a build with nothing
// new writes nothing. What no source produces any more is removed at the end.
let files = 0;
let changed = 0;
const started = Date.now();
for (const group of ["packages", "apps"]) {
  for (const name of readdirSync(join(root, group))) {
    const pkg = join(root, group, name);
    const src = join(pkg, "src");
    if (!statSync(src, { throwIfNoEntry: false })?.isDirectory()) continue;
    const dist = join(pkg, "dist");
    const written = new Set();
    for (const file of walk(src)) {
      if (isTest(file)) continue;
      const out = join(dist, relative(src, file));
      if (!file.endsWith(".ts") || file.endsWith(".d.ts")) {
        if (put(out, readFileSync(file), written)) changed++;
        continue;
      }
      const js = out.replace(/\.ts$/, ".js");
      files++;
      // Built since the source last changed: nothing to do (a checkout or an edit makes the source newer).
      if (statSync(js, { throwIfNoEntry: false })?.mtimeMs >= statSync(file).mtimeMs) {
        written.add(js);
        written.add(`${js}.map`);
        continue;
      }
      const {
        outputText,
        sourceMapText,
        diagnostics = [],
      } = ts.transpileModule(readFileSync(file, "utf8"), {
        compilerOptions,
        fileName: file,
        reportDiagnostics: true,
      });
      if (diagnostics.length) {
        const text = ts.formatDiagnostics(diagnostics, {
          getCanonicalFileName: (f) => f,
          getCurrentDirectory: () => root,
          getNewLine: () => "\n",
        });
        throw new Error(`${relative(root, file)}: ${text}`);
      }
      const code = outputText.replace(/\/\/# sourceMappingURL=.*$/m, `//# sourceMappingURL=${js.split("/").pop()}.map`);
      if (put(js, code, written)) changed++;
      if (sourceMapText) put(`${js}.map`, sourceMapText, written);
    }
    if (existsSync(dist)) {
      for (const file of walk(dist)) if (!written.has(file) && !file.endsWith(".tmp")) rmSync(file);
    }
  }
}
process.stdout.write(`compiled ${files} files (${changed} changed) in ${Date.now() - started} ms\n`);
