import { execFileSync } from "node:child_process";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { cpus, loadavg, totalmem } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { removeOwnTestNetwork, removeStaleTestNetworks } from "@tern/testing";
import { type BenchContext, createContext } from "./context.ts";
import { renderHtml } from "./html.ts";
import { removeBenchContainers } from "./raw-docker.ts";
import { type BenchResult, type BenchRow, formatTable, writeResult } from "./report.ts";
import { agentBashRows } from "./rows/agent-bash.ts";
import { agentStepsRows } from "./rows/agent-steps.ts";
import { conversationsGetRows } from "./rows/conversations-get.ts";
import { engineRows } from "./rows/engines.ts";
import { eventAppendRows } from "./rows/event-append.ts";
import { eventsSearchRows } from "./rows/events-search.ts";
import { llmRequestSizeRows } from "./rows/llm-request-size.ts";
import { readyRows } from "./rows/ready.ts";
import { rssRows } from "./rows/rss.ts";
import { storageRows } from "./rows/storage.ts";
import { streamRows } from "./rows/stream.ts";
import { terminalRows } from "./rows/terminal.ts";
import { buildServices } from "./services.ts";

/** The sections of `--gate`: those holding the rows the CI speed gate compares with their floors. */
const GATE_SECTIONS = new Set(["ready", "append", "search", "get", "terminal", "agent-bash"]);

/** Sections in run order; RSS last, as it reports what the others sampled. */
const sections: { name: string; run: (ctx: BenchContext) => Promise<BenchRow[]> | BenchRow[] }[] = [
  { name: "ready", run: readyRows },
  { name: "engines", run: engineRows },
  { name: "storage", run: storageRows },
  { name: "append", run: eventAppendRows },
  { name: "search", run: eventsSearchRows },
  { name: "get", run: conversationsGetRows },
  { name: "stream", run: streamRows },
  { name: "llm", run: llmRequestSizeRows },
  { name: "terminal", run: terminalRows },
  { name: "agent-bash", run: agentBashRows },
  { name: "agent-steps", run: agentStepsRows },
  { name: "rss", run: rssRows },
];

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    quick: { type: "boolean", default: false },
    /** The CI speed gate's rows only, small (bench/test/gate.test.ts). */
    gate: { type: "boolean", default: false },
    /** One of the three runs of a run of record (`pnpm bench:record`): its id, kept in the results. */
    record: { type: "string" },
    only: { type: "string", multiple: true },
    out: { type: "string" },
    /** Also write the report as a self-contained HTML page (charts in inline SVG) beside the JSON. */
    html: { type: "boolean", default: false },
    /** Render the HTML report of an earlier run's JSON instead of running (with --html). */
    from: { type: "string" },
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

const writeHtml = async (jsonFile: string, result: BenchResult): Promise<string> => {
  const file = `${jsonFile.replace(/\.json$/, "")}.html`;
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, renderHtml(result));
  return file;
};

const main = async () => {
  if (values.from) {
    const file = values.from;
    const result = JSON.parse(await readFile(file, "utf8")) as BenchResult;
    process.stdout.write(`report: ${await writeHtml(values.out ? join(values.out, basename(file)) : file, result)}\n`);
    return;
  }
  await removeStaleTestNetworks();
  buildServices();
  const ctx = createContext(values.quick ?? false, values.gate ?? false);
  const startedAt = new Date().toISOString();
  // The machine's load average beside the numbers: on a shared machine it says how loaded the run was.
  const load: number[] = [loadavg()[0] ?? 0];
  const loadSampler = setInterval(() => load.push(loadavg()[0] ?? 0), 15_000);
  const rows: BenchRow[] = [];
  const failures: BenchResult["failures"] = [];
  const only = values.only && values.only.length > 0 ? new Set(values.only) : null;
  try {
    for (const s of sections) {
      if (only && !only.has(s.name)) continue;
      if (ctx.gate && !GATE_SECTIONS.has(s.name)) continue;
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
    clearInterval(loadSampler);
    await removeBenchContainers(ctx.sandboxes, ctx.runId);
    await removeOwnTestNetwork();
  }
  const result: BenchResult = {
    startedAt,
    finishedAt: new Date().toISOString(),
    quick: ctx.quick,
    ...(ctx.gate ? { gate: true } : {}),
    ...(values.record ? { record: values.record } : {}),
    machine: {
      cpus: cpus().length,
      memoryGiB: Math.round(totalmem() / 2 ** 30),
      node: process.version,
      docker: versionOf("docker", ["version", "--format", "{{.Server.Version}}"]),
      dockerStorage: ctx.storage,
      postgres: versionOf("psql", ["--version"]),
      load: { min: Math.min(...load), mean: load.reduce((a, b) => a + b, 0) / load.length, max: Math.max(...load) },
    },
    rows,
    failures,
  };
  process.stdout.write(`\n${formatTable(rows)}\n`);
  const dir = values.out ?? fileURLToPath(new URL("../results/", import.meta.url));
  const written = await writeResult(dir, result);
  process.stdout.write(`results: ${written}\n`);
  if (values.html) process.stdout.write(`report: ${await writeHtml(written, result)}\n`);
  if (failures.length > 0) {
    // Each failure's cause again at the very end, where a CI log's tail still shows it.
    for (const f of failures) process.stdout.write(`section ${f.section} failed: ${f.error}\n`);
    process.stdout.write(`failed sections: ${failures.map((f) => f.section).join(", ")}\n`);
    process.exitCode = 1;
  }
};

main().catch((err) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
