import { execFileSync } from "node:child_process";
import { cpus, totalmem } from "node:os";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { type BenchContext, createContext } from "./context.ts";
import { removeBenchContainers } from "./raw-docker.ts";
import { type BenchResult, type BenchRow, formatTable, writeResult } from "./report.ts";
import { conversationsGetRows } from "./rows/conversations-get.ts";
import { eventAppendRows } from "./rows/event-append.ts";
import { eventsSearchRows } from "./rows/events-search.ts";
import { readyRows } from "./rows/ready.ts";
import { rssRows } from "./rows/rss.ts";

/** Sections in run order; RSS last, as it reports what the others sampled. */
const sections: { name: string; run: (ctx: BenchContext) => Promise<BenchRow[]> | BenchRow[] }[] = [
  { name: "ready", run: readyRows },
  { name: "append", run: eventAppendRows },
  { name: "search", run: eventsSearchRows },
  { name: "get", run: conversationsGetRows },
  { name: "rss", run: rssRows },
];

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    quick: { type: "boolean", default: false },
    only: { type: "string", multiple: true },
    out: { type: "string" },
  },
  strict: true,
});

const versionOf = (cmd: string, args: string[]): string | null => {
  try {
    return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return null;
  }
};

const main = async () => {
  const ctx = createContext(values.quick ?? false);
  const startedAt = new Date().toISOString();
  const rows: BenchRow[] = [];
  const failures: BenchResult["failures"] = [];
  const only = values.only && values.only.length > 0 ? new Set(values.only) : null;
  try {
    for (const s of sections) {
      if (only && !only.has(s.name)) continue;
      ctx.progress(`${s.name}…`);
      try {
        rows.push(...(await s.run(ctx)));
      } catch (err) {
        const error = err instanceof Error ? (err.stack ?? err.message) : String(err);
        ctx.progress(`${s.name} failed: ${error}`);
        failures.push({ section: s.name, error });
      }
    }
  } finally {
    await removeBenchContainers(ctx.docker, ctx.runId);
  }
  const result: BenchResult = {
    startedAt,
    finishedAt: new Date().toISOString(),
    quick: ctx.quick,
    machine: {
      cpus: cpus().length,
      memoryGiB: Math.round(totalmem() / 2 ** 30),
      node: process.version,
      docker: versionOf("docker", ["version", "--format", "{{.Server.Version}}"]),
      postgres: versionOf("psql", ["--version"]),
    },
    rows,
    failures,
  };
  process.stdout.write(`\n${formatTable(rows)}\n`);
  const dir = values.out ?? fileURLToPath(new URL("../results/", import.meta.url));
  process.stdout.write(`results: ${await writeResult(dir, result)}\n`);
  if (failures.length > 0) {
    process.stdout.write(`failed sections: ${failures.map((f) => f.section).join(", ")}\n`);
    process.exitCode = 1;
  }
};

main().catch((err) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
