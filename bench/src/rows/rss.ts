import type { BenchContext } from "../context.ts";
import { type BenchRow, row } from "../report.ts";

const median = (v: number[]): number => {
  const s = [...v].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
};

/** RSS (VmRSS) of the API and worker processes the other sections spawned: idle, and peak under their load. */
export const rssRows = (ctx: BenchContext): BenchRow[] => {
  const out: BenchRow[] = [];
  for (const proc of ["api", "worker"] as const) {
    const s = ctx.rss[proc];
    if (s.idle.length === 0 || s.load.length === 0) throw new Error(`no RSS samples of the ${proc}`);
    out.push(
      row({
        id: `rss.${proc}.idle`,
        label: `RSS of the ${proc}, idle`,
        unit: "MiB",
        value: median(s.idle),
        detail: { samples: s.idle.length },
      }),
      row({
        id: `rss.${proc}.load`,
        label: `RSS of the ${proc}, under load (peak)`,
        unit: "MiB",
        value: Math.max(...s.load),
        detail: { median: median(s.load), samples: s.load.length },
      }),
    );
  }
  return out;
};
