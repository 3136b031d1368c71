// Compiles every app and package (src/**/*.ts, tests left out) to JavaScript in its dist/, one file
// per source file, so production runs plain `node` with no TypeScript loader. Types are checked by
// `pnpm typecheck` (tsc); this is TypeScript's own per-file emit (every package is isolatedModules),
// with relative `.ts` imports rewritten to `.js`. Non-TypeScript files under src/ (scripts shipped
// into sandboxes) are copied beside. A package's exports resolve to dist/ under the `tern-dist`
// condition (`node --conditions=tern-dist`), and to src/ otherwise (tests, tsx, editors).
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
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

let files = 0;
const started = Date.now();
for (const group of ["packages", "apps"]) {
  for (const name of readdirSync(join(root, group))) {
    const pkg = join(root, group, name);
    const src = join(pkg, "src");
    if (!statSync(src, { throwIfNoEntry: false })?.isDirectory()) continue;
    const dist = join(pkg, "dist");
    rmSync(dist, { recursive: true, force: true });
    for (const file of walk(src)) {
      if (isTest(file)) continue;
      const out = join(dist, relative(src, file));
      mkdirSync(dirname(out), { recursive: true });
      if (!file.endsWith(".ts") || file.endsWith(".d.ts")) {
        copyFileSync(file, out);
        continue;
      }
      const js = out.replace(/\.ts$/, ".js");
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
      writeFileSync(
        js,
        outputText.replace(/\/\/# sourceMappingURL=.*$/m, `//# sourceMappingURL=${js.split("/").pop()}.map`),
      );
      if (sourceMapText) writeFileSync(`${js}.map`, sourceMapText);
      files++;
    }
  }
}
process.stdout.write(`compiled ${files} files in ${Date.now() - started} ms\n`);
