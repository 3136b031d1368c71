import { describe, expect, it } from "vitest";
import { GATE_TOLERANCE, GATED_ROWS, judgeGate } from "../src/gate.ts";
import type { BenchRow } from "../src/report.ts";

const rowOf = (id: string, ratio: number | null): BenchRow => ({
  id,
  label: id,
  unit: "ms",
  value: 1,
  floor: 1,
  floorLabel: null,
  ratio,
  target: null,
  met: null,
});

describe("the speed gate's verdicts", () => {
  it("passes a ratio at its limit and fails one just past it, or a row the run lacks", () => {
    const [first, second, ...rest] = GATED_ROWS;
    if (!first || !second) throw new Error("no gated rows");
    const limit = (t: number) => t * (1 + GATE_TOLERANCE);
    const verdicts = judgeGate({
      rows: [
        rowOf(first.id, limit(first.target)),
        rowOf(second.id, limit(second.target) * 1.01),
        ...rest.slice(1).map((g) => rowOf(g.id, g.target)),
      ],
    });
    const byId = new Map(verdicts.map((v) => [v.id, v.ok]));
    expect(byId.get(first.id)).toBe(true);
    expect(byId.get(second.id)).toBe(false);
    // The first of `rest` was left out of the run: a missing row fails.
    expect(byId.get(rest[0]?.id ?? "")).toBe(false);
    for (const g of rest.slice(1)) expect(byId.get(g.id), g.id).toBe(true);
  });
});
