import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

/**
 * The process's Prometheus metrics (served at /metrics: the API's and the worker's own HTTP
 * server). One registry per process, with Node's default metrics (RSS, heap, event loop lag...).
 * Names follow Prometheus's conventions: seconds, `_total` counters, bounded label sets (routes as
 * their patterns, never raw paths or ids).
 */
export const metricsRegistry = new Registry();
collectDefaultMetrics({ register: metricsRegistry, prefix: "tern_" });

const registers = [metricsRegistry];
/** Latencies from a millisecond to two minutes. */
const secondsBuckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

export const metrics = {
  httpDuration: new Histogram({
    name: "tern_http_request_duration_seconds",
    help: "HTTP request duration by method, route pattern and status",
    labelNames: ["method", "route", "status"] as const,
    buckets: secondsBuckets,
    registers,
  }),
  /**
   * The start metrics count every start where it was served, by `path`: "warm" in the API (a warm
   * row claimed in the start's transaction: one stage, WARM_CLAIM), "queued" in the worker that
   * ran its pipeline.
   */
  startStageDuration: new Histogram({
    name: "tern_start_stage_duration_seconds",
    help: "Duration of each start stage that completed, by path (warm: claimed by the API; queued: the worker's pipeline)",
    labelNames: ["path", "stage"] as const,
    buckets: secondsBuckets,
    registers,
  }),
  startOutcomes: new Counter({
    name: "tern_start_outcomes_total",
    help: "Start tasks ended, by path, final status and (for ERROR) the stage that failed",
    labelNames: ["path", "status", "error_stage"] as const,
    registers,
  }),
  timeToReady: new Histogram({
    name: "tern_start_time_to_ready_seconds",
    help: "From a start task's creation to READY, by path",
    labelNames: ["path"] as const,
    buckets: secondsBuckets,
    registers,
  }),
  jobWait: new Histogram({
    name: "tern_queue_job_wait_seconds",
    help: "From a job's enqueue (or its delay's end) to a worker taking it",
    labelNames: ["queue", "job"] as const,
    buckets: secondsBuckets,
    registers,
  }),
  jobProcessing: new Histogram({
    name: "tern_queue_job_processing_seconds",
    help: "Processing time of one job attempt, by outcome",
    labelNames: ["queue", "job", "outcome"] as const,
    buckets: secondsBuckets,
    registers,
  }),
  queueDepth: new Gauge({
    name: "tern_queue_jobs",
    help: "Jobs in each queue by state, read when scraped",
    labelNames: ["queue", "state"] as const,
    registers,
  }),
  poolSize: new Gauge({
    name: "tern_pool_warm_sandboxes",
    help: "Warm sandboxes ready to be claimed in this worker's pool",
    registers,
  }),
  poolTarget: new Gauge({
    name: "tern_pool_target_sandboxes",
    help: "Warm sandboxes this worker's pool keeps now: SANDBOX_POOL_SIZE at rest, up to SANDBOX_POOL_MAX as starts arrive faster",
    registers,
  }),
  poolClaims: new Counter({
    name: "tern_pool_claims_total",
    help: "Starts that looked in the warm pool, by result (hit: took a warm sandbox; miss: made one)",
    labelNames: ["result"] as const,
    registers,
  }),
  janitorSweeps: new Counter({
    name: "tern_janitor_sweeps_total",
    help: "Janitor sweeps this process ran, by outcome",
    labelNames: ["outcome"] as const,
    registers,
  }),
  janitorSweepDuration: new Histogram({
    name: "tern_janitor_sweep_duration_seconds",
    help: "Duration of the janitor sweeps this process ran",
    buckets: secondsBuckets,
    registers,
  }),
  agentSteps: new Counter({
    name: "tern_agent_steps_total",
    help: "Steps of the agent loop",
    registers,
  }),
  llmDuration: new Histogram({
    name: "tern_llm_request_duration_seconds",
    help: "LLM request latency by model",
    labelNames: ["model"] as const,
    buckets: secondsBuckets,
    registers,
  }),
  llmTokens: new Counter({
    name: "tern_llm_tokens_total",
    help: "LLM tokens by model and kind (prompt, completion)",
    labelNames: ["model", "kind"] as const,
    registers,
  }),
  toolDuration: new Histogram({
    name: "tern_tool_duration_seconds",
    help: "Agent tool call duration by tool",
    labelNames: ["tool"] as const,
    buckets: secondsBuckets,
    registers,
  }),
  eventsAppended: new Counter({
    name: "tern_events_appended_total",
    help: "Conversation events appended",
    registers,
  }),
};

/** The text exposition of every metric, and its content type. */
export const renderMetrics = async (): Promise<{ body: string; contentType: string }> => ({
  body: await metricsRegistry.metrics(),
  contentType: metricsRegistry.contentType,
});
