import { type BenchResult, type BenchRow, floorNote } from "./report.ts";

/**
 * The bench's results as one self-contained HTML page: charts drawn as inline SVG (no script, no
 * CDN, no network), so the report opens anywhere, offline, as a file. Charts: time to READY
 * against its floor, the stage breakdown of each start kind, search latency against raw SQL, and
 * every row's ratio against its target.
 */

const esc = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c);

const num = (v: number): string =>
  Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2);

const palette = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"];

interface Bar {
  label: string;
  value: number;
  /** Drawn as a tick over the bar. */
  floor?: number | null;
  met?: boolean | null;
}

/** Horizontal bars with an optional floor tick each; values in `unit`. */
const barChart = (title: string, unit: string, bars: Bar[]): string => {
  if (bars.length === 0) return "";
  const width = 880;
  const labelW = 330;
  const rowH = 26;
  const height = bars.length * rowH + 40;
  const max = Math.max(...bars.flatMap((b) => [b.value, b.floor ?? 0])) * 1.1 || 1;
  const x = (v: number) => labelW + (v / max) * (width - labelW - 70);
  const rows = bars
    .map((b, i) => {
      const y = 20 + i * rowH;
      const fill = b.met === false ? "#e15759" : b.met === true ? "#59a14f" : "#4e79a7";
      const tick =
        b.floor !== undefined && b.floor !== null
          ? `<line x1="${x(b.floor)}" x2="${x(b.floor)}" y1="${y - 3}" y2="${y + rowH - 5}" stroke="#222" stroke-width="2" stroke-dasharray="3,2"><title>floor ${num(b.floor)} ${esc(unit)}</title></line>`
          : "";
      return `<text x="${labelW - 8}" y="${y + 14}" text-anchor="end">${esc(b.label)}</text>
<rect x="${labelW}" y="${y}" width="${Math.max(1, x(b.value) - labelW)}" height="${rowH - 8}" fill="${fill}"><title>${esc(b.label)}: ${num(b.value)} ${esc(unit)}</title></rect>
<text x="${x(b.value) + 4}" y="${y + 14}">${num(b.value)}</text>${tick}`;
    })
    .join("\n");
  return `<figure><figcaption>${esc(title)} <small>(${esc(unit)}; dashed: the floor measured in the same run)</small></figcaption>
<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-size="12" font-family="sans-serif" role="img" aria-label="${esc(title)}">${rows}</svg></figure>`;
};

/** One stacked bar per start kind: the median time of each stage. */
const stageChart = (rows: BenchRow[]): string => {
  const kinds = rows.filter((r) => r.detail && typeof r.detail.stages === "object" && r.detail.stages !== null);
  if (kinds.length === 0) return "";
  const stageNames = [...new Set(kinds.flatMap((r) => Object.keys(r.detail?.stages as Record<string, number>)))];
  const width = 880;
  const labelW = 330;
  const rowH = 30;
  const totals = kinds.map((r) => Object.values(r.detail?.stages as Record<string, number>).reduce((a, b) => a + b, 0));
  const max = Math.max(...totals, 1) * 1.1;
  const scale = (v: number) => (v / max) * (width - labelW - 70);
  const bars = kinds
    .map((r, i) => {
      const y = 10 + i * rowH;
      let at = labelW;
      const stages = r.detail?.stages as Record<string, number>;
      const parts = stageNames
        .map((s, j) => {
          const w = scale(stages[s] ?? 0);
          const rect = `<rect x="${at}" y="${y}" width="${Math.max(0, w)}" height="${rowH - 10}" fill="${palette[j % palette.length]}"><title>${esc(s)}: ${num(stages[s] ?? 0)} ms</title></rect>`;
          at += w;
          return rect;
        })
        .join("");
      return `<text x="${labelW - 8}" y="${y + 14}" text-anchor="end">${esc(r.label)}</text>${parts}<text x="${at + 4}" y="${y + 14}">${num(totals[i] ?? 0)} ms</text>`;
    })
    .join("\n");
  const legendY = 20 + kinds.length * rowH;
  const legend = stageNames
    .map((s, j) => {
      const lx = 10 + (j % 3) * 250;
      const ly = legendY + Math.floor(j / 3) * 18;
      return `<rect x="${lx}" y="${ly}" width="12" height="12" fill="${palette[j % palette.length]}"/><text x="${lx + 16}" y="${ly + 10}">${esc(s)}</text>`;
    })
    .join("");
  const height = legendY + Math.ceil(stageNames.length / 3) * 18 + 10;
  return `<figure><figcaption>Stage breakdown of a start <small>(median ms per stage, server side)</small></figcaption>
<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-size="12" font-family="sans-serif" role="img" aria-label="stage breakdown">${bars}${legend}</svg></figure>`;
};

export const renderHtml = (result: BenchResult): string => {
  const rows = result.rows;
  // Times only: the ready section also has hit rates (%).
  const ready = rows.filter((r) => r.id.startsWith("ready.") && r.unit === "ms");
  const search = rows.filter((r) => r.id.startsWith("search."));
  const ratios = rows.filter((r) => r.ratio !== null);
  const table = rows
    .map(
      (
        r,
      ) => `<tr class="${r.met === false ? "miss" : r.met ? "met" : ""}"><td>${esc(r.label)}</td><td>${num(r.value)} ${esc(r.unit)}</td>
<td>${r.floor === null ? "-" : `${num(r.floor)} ${esc(r.unit)}${floorNote(r) ? ` (${esc(floorNote(r))})` : ""}`}</td>
<td>${r.ratio === null ? "-" : `${r.ratio.toFixed(2)}×`}</td><td>${esc(r.target ?? "-")}</td><td>${r.met === null ? "-" : r.met ? "yes" : "NO"}</td></tr>`,
    )
    .join("\n");
  const failures = result.failures
    .map((f) => `<li><b>${esc(f.section)}</b>: <pre>${esc(f.error.split("\n")[0] ?? "")}</pre></li>`)
    .join("");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tern bench ${esc(result.startedAt)}</title>
<style>
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 920px; }
table { border-collapse: collapse; font-size: 13px; } td, th { border: 1px solid #ccc; padding: 3px 6px; text-align: left; }
tr.miss td { background: #fde8e8; } tr.met td { background: #e8f6e8; }
figure { margin: 24px 0; } figcaption { font-weight: bold; margin-bottom: 6px; }
</style></head><body>
<h1>tern bench</h1>
<p>${esc(result.startedAt)} → ${esc(result.finishedAt)}${result.quick ? " (quick)" : ""} · ${result.machine.cpus} CPUs, ${result.machine.memoryGiB} GiB · Node ${esc(result.machine.node)} · Docker ${esc(result.machine.docker ?? "?")}</p>
${barChart(
  "Time to READY",
  "ms",
  ready.map((r) => ({ label: r.label, value: r.value, floor: r.floor, met: r.met })),
)}
${stageChart(ready)}
${barChart(
  "Events search latency against raw SQL",
  "ms",
  search.map((r) => ({ label: r.label, value: r.value, floor: r.floor, met: r.met })),
)}
${barChart(
  "Every ratio against its floor (1 = the floor)",
  "×",
  ratios.map((r) => ({ label: r.label, value: r.ratio ?? 0, floor: 1, met: r.met })),
)}
<h2>All rows</h2>
<table><thead><tr><th>row</th><th>value</th><th>floor</th><th>ratio</th><th>target</th><th>met?</th></tr></thead>
<tbody>${table}</tbody></table>
${failures ? `<h2>Failed sections</h2><ul>${failures}</ul>` : ""}
</body></html>
`;
};
