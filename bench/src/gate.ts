import type { BenchResult, BenchRow } from "./report.ts";

/**
 * The CI speed gate: the rows `pnpm bench --gate` measures beside their floors in the same run, each
 * with the ratio it may not pass. `target` is the bench's own ratio target for the row; a row whose
 * bench target is absolute gets the ratio that target stands for on the machine of record, said in `why`.
 * A row fails when its ratio is above target × (1 + GATE_TOLERANCE). Absolute rows are not gated.
 */
export interface GatedRow {
  id: string;
  /** The ratio the gate holds the row to: the bench's target, or, for a known miss, where the row stands. */
  target: number;
  /**
   * A known miss: the bench's own target, which the service does not meet yet. The gate then holds the
   * row where it stands (`target`), so a change that makes it worse still fails.
   */
  benchTarget?: number;
  why: string;
}

export const GATED_ROWS: GatedRow[] = [
  { id: "ready.cold.p50", target: 1.15, why: "cold start against raw create+start of the same image" },
  {
    id: "ready.repo.p50",
    target: 2,
    benchTarget: 1.1,
    why: "first repository start against its floor in the service's order (clone beside the create, then setup, hook and skill execs); 2.0 × in the first gate runs on a loaded machine",
  },
  { id: "ready.repo_snapshot.p50", target: 1.15, why: "repeat repository start against the cold floor" },
  {
    id: "ready.pool.rtt",
    target: 8,
    why: "warm start's round trip against a bare HTTP POST's (15 ms p50 target, 1-2 ms bare)",
  },
  {
    id: "append.agent",
    target: 4.5,
    why: "COPY's rate over the 8-run agent writer's (10,000 events/s target against COPY's 45,000 on the machine of record)",
  },
  { id: "search.first.bound", target: 1.25, why: "events search p50 against raw SQL + bare HTTP" },
  { id: "search.deep.bound", target: 1.25, why: "as above, a deep page" },
  { id: "search.kind.bound", target: 1.25, why: "as above, a kind filter" },
  { id: "search.window.bound", target: 1.25, why: "as above, a time window" },
  { id: "get.conversations.rps", target: 4, why: "bare Hono's rate over the authenticated GET's" },
  { id: "terminal.echo.p50", target: 1.5, why: "terminal tool round trip against bare docker exec" },
  { id: "agent.bash.p50", target: 1.5, why: "agent-server bash round trip against bare docker exec" },
];

/**
 * How far past its target a gated ratio may come before the gate fails: chosen from the spread of ten
 * gate runs on the development machine (bench/README.md, "CI speed gate").
 */
export const GATE_TOLERANCE = 0.6;

export interface GateVerdict {
  id: string;
  ratio: number | null;
  limit: number;
  ok: boolean;
}

/** Each gated row of a gate run against its limit; a row the run lacks fails. */
export const judgeGate = (result: Pick<BenchResult, "rows">, tolerance = GATE_TOLERANCE): GateVerdict[] => {
  const byId = new Map<string, BenchRow>(result.rows.map((r) => [r.id, r]));
  return GATED_ROWS.map((g) => {
    const ratio = byId.get(g.id)?.ratio ?? null;
    const limit = g.target * (1 + tolerance);
    return { id: g.id, ratio, limit, ok: ratio !== null && Number.isFinite(ratio) && ratio <= limit };
  });
};

export const formatVerdicts = (verdicts: GateVerdict[]): string =>
  verdicts
    .map(
      (v) =>
        `${v.ok ? "ok  " : "FAIL"} ${v.id.padEnd(26)} ratio ${v.ratio === null ? "-" : v.ratio.toFixed(3)} (limit ${v.limit.toFixed(3)})`,
    )
    .join("\n");
