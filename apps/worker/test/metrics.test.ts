import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { liveWorkers } from "@tern/queue";
import { repoRoot, type ServiceProcess, waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStartHarness, type StartHarness } from "./start-harness.ts";

/**
 * /metrics on the API and on the worker's own server: valid Prometheus text (promtool lints it clean),
 * with the series an operator watches after a start went through.
 */

let h: StartHarness;
let api: ServiceProcess;
let workerUrl: string;

const REPO = "acme/metrics";

beforeAll(async () => {
  h = await createStartHarness();
  await h.git.createFixtureRepo(REPO, { "README.md": "metrics\n" });
  api = await h.startApi();
  await h.startWorker({ WORKER_ID: "metrics", SANDBOX_POOL_SIZE: "1", JANITOR_INTERVAL_MS: "1000" });
  workerUrl = await waitFor(
    async () => (await liveWorkers(h.redis, h.prefix)).find((w) => w.workerId === "metrics")?.url,
    {
      what: "the worker's server in the directory",
    },
  );
});

afterAll(async () => {
  await h?.close();
});

/**
 * promtool, which scripts/test.sh installs (scripts/lib/ensure-promtool.sh, from Debian's prometheus
 * package); PROMTOOL_PATH overrides. Missing, the test fails: a lint that silently did not run proves nothing.
 */
const promtoolPath = process.env.PROMTOOL_PATH ?? "promtool";

/** promtool check metrics: exit 0 and no lint problems. */
const promtool = (text: string) => {
  const res = spawnSync(promtoolPath, ["check", "metrics"], { input: text, encoding: "utf8" });
  if (res.error)
    throw new Error(`${promtoolPath} did not run (${res.error.message}): run scripts/lib/ensure-promtool.sh`);
  return { ok: res.status === 0, output: `${res.stdout}${res.stderr}` };
};

const scrape = async (url: string) => {
  const res = await fetch(`${url}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  const { output } = promtool(text);
  expect(output).not.toMatch(/error while linting/);
  // prom-client's own default gauges (nodejs_active_handles_total...) break the `_total` rule;
  // every other series must lint clean.
  const problems = output
    .split("\n")
    .filter((l) => l.trim() !== "" && !/^tern_nodejs_active_\w+_total non-counter metrics/.test(l));
  expect(problems).toEqual([]);
  return text;
};

describe("/metrics", () => {
  it("the API's and the worker's pass promtool and carry the start, queue, pool and HTTP series; a warm start and a queued one are each counted", async () => {
    const { key } = await h.newUser();
    // A start without a repository, once the worker's warm row is there: the API claims it and
    // answers READY (the warm path). One with a repository goes through the worker's pipeline.
    await waitFor(
      async () =>
        (await h.database.db.selectFrom("warm_sandboxes").select("id").where("claimed_at", "is", null).execute())
          .length > 0,
      { what: "the worker's warm row" },
    );
    const warm = (await (await h.post(api, key, {})).json()) as { id: string; status: string };
    expect(warm.status).toBe("READY");
    const res = await h.post(api, key, { selected_repository: REPO });
    const { id } = (await res.json()) as { id: string };
    expect((await h.waitForTask(id)).task.status).toBe("READY");
    await fetch(`${api.url}/api/v1/app-conversations/start-tasks?ids=${id}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    const janitor = await h.watchJanitor();
    await janitor.after(1);

    const apiText = await scrape(api.url);
    expect(apiText).toMatch(
      /tern_http_request_duration_seconds_count\{method="POST",route="\/api\/v1\/app-conversations",status="200"\} 2/,
    );
    // The warm start, counted where it was served: the API, with its claim as a stage.
    expect(apiText).toMatch(/tern_start_outcomes_total\{path="warm",status="READY",error_stage=""\} 1/);
    expect(apiText).toMatch(/tern_start_stage_duration_seconds_count\{path="warm",stage="WARM_CLAIM"\} 1/);
    expect(apiText).toMatch(/tern_start_time_to_ready_seconds_count\{path="warm"\} 1/);
    expect(apiText).toMatch(
      /tern_http_request_duration_seconds_count\{method="GET",route="\/api\/v1\/app-conversations\/start-tasks",status="200"\} 1/,
    );
    expect(apiText).toMatch(/tern_process_resident_memory_bytes \d+/);

    const text = await scrape(workerUrl);
    // The queued start, counted by the worker that ran its pipeline, each stage it went through.
    for (const stage of ["WAITING_FOR_SANDBOX", "PREPARING_REPOSITORY", "STARTING_CONVERSATION"]) {
      expect(text).toMatch(new RegExp(`tern_start_stage_duration_seconds_count\\{path="queued",stage="${stage}"\\} 1`));
    }
    expect(text).toMatch(/tern_start_outcomes_total\{path="queued",status="READY",error_stage=""\} 1/);
    expect(text).toMatch(/tern_start_time_to_ready_seconds_count\{path="queued"\} 1/);
    expect(text).toMatch(/tern_queue_job_wait_seconds_count\{queue="conversation-start",job="conversation.start"\} 1/);
    expect(text).toMatch(
      /tern_queue_job_processing_seconds_count\{queue="conversation-start",job="conversation.start",outcome="completed"\} 1/,
    );
    expect(text).toMatch(/tern_queue_jobs\{queue="conversation-start",state="waiting"\} 0/);
    expect(text).toMatch(/tern_pool_claims_total\{result="(hit|miss)"\} 1/);
    expect(text).toMatch(/tern_pool_warm_sandboxes \d/);
    expect(text).toMatch(/tern_janitor_sweeps_total\{outcome="ok"\} [1-9]/);

    // The Grafana dashboard (docker/grafana) asks only for series these processes export.
    const dashboard = readFileSync(join(repoRoot, "docker/grafana/tern-dashboard.json"), "utf8");
    const asked = new Set(
      [...dashboard.matchAll(/\b(tern_[a-z0-9_]+)/g)].map((m) => m[1]!.replace(/_(bucket|count|sum)$/, "")),
    );
    const exported = new Set([...`${apiText}\n${text}`.matchAll(/^# TYPE (\S+)/gm)].map((m) => m[1]!));
    expect([...asked].filter((n) => !exported.has(n))).toEqual([]);
  });

  it("promtool runs here, and fails a broken exposition and a misnamed counter (its positive control)", () => {
    expect(promtool('# HELP a_total A count.\n# TYPE a_total counter\na_total{b="c"} 1\n')).toEqual({
      ok: true,
      output: "",
    });
    expect(promtool('# TYPE a_total counter\na_total{b="c"} x\n').ok).toBe(false);
    expect(promtool("# HELP a A count.\n# TYPE a counter\na 1\n").output).toMatch(
      /counter metrics should have "_total" suffix/,
    );
  });
});
