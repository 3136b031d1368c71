import type { ActionPayload } from "@tern/core";

/**
 * A local rating of every tool call, beside the label the model gives it: a prompt-injected model
 * labels `rm -rf /` LOW, and ConfirmRisky must not take its word alone. After OpenHands' pattern
 * analyzer and policy rails (openhands/sdk/security/defense_in_depth/: pattern.py, policy_rails.py,
 * utils.py), without its shell parser: what the call will run (its arguments and tool name) is
 * scanned for destructive, code-running and download-and-run shapes; all of it, the model's
 * summary and thought too, for instruction-override text. Invisible characters and look-alike
 * forms (fullwidth letters) are folded first, so `r\u200bm` reads as `rm`.
 *
 * The rating only ever adds to the model's: the confirmation decision asks the policy about both
 * (core's requiresConfirmation, `analyzed_risk`), so a call either would stop still stops.
 */
type PatternRisk = "LOW" | "MEDIUM" | "HIGH";

export interface PatternRating {
  risk: PatternRisk;
  /** Which detector fired (OpenHands' ids); absent for LOW. */
  detector?: string;
}

/** Characters scanned of each corpus at most: bounds the regexes' work (OpenHands' cap). */
const EXTRACT_CAP = 30_000;

const RECURSIVE_FORCE_RM = /\brm\s+(?:-[frR]{2,}|-[rR]\s+-f|-f\s+-[rR]|--recursive\s+--force|--force\s+--recursive)\b/i;

/** What a call will run: HIGH shapes. Spans are bounded (no backtracking blow-up). */
const execHigh: [RegExp, string][] = [
  [RECURSIVE_FORCE_RM, "exec.destruct.rm_rf"],
  [/\bsudo\s+rm\b/i, "exec.destruct.sudo_rm"],
  [/\bmkfs\.\w+/i, "exec.destruct.mkfs"],
  [/\bdd\b.{0,100}of=\/dev\//i, "exec.destruct.dd_raw_disk"],
  [/\beval\s*\(/i, "exec.code.eval_call"],
  [/\bexec\s*\(/i, "exec.code.exec_call"],
  [/\bos\.system\s*\(/i, "exec.code.os_system"],
  [/\bsubprocess\.(?:call|run|Popen|check_output|check_call)\s*\(/i, "exec.code.subprocess"],
  [/\bcurl\b[^|]{0,200}\|\s*(?:sudo\s+)?(?:ba|z|da)?sh\b/i, "exec.net.curl_pipe_exec"],
  [/\bwget\b[^|]{0,200}\|\s*(?:sudo\s+)?(?:ba|z|da)?sh\b/i, "exec.net.wget_pipe_exec"],
];

/** What a call will run: MEDIUM shapes. */
const execMedium: [RegExp, string][] = [
  [/\bcurl\b.{0,100}https?:\/\//i, "exec.net.curl"],
  [/\bwget\b.{0,100}https?:\/\//i, "exec.net.wget"],
];

/** Anywhere in the call, the model's own words included. */
const injectionHigh: [RegExp, string][] = [
  [
    /\b(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+)?(?:previous|prior|above)\s+(?:instructions?|prompts?|rules?|directives?)\b/i,
    "inject.override",
  ],
];
const injectionMedium: [RegExp, string][] = [
  [/\byou\s+are\s+now\s+(?:in\s+)?(?:\w+\s+)?mode\b/i, "inject.mode_switch"],
  [/\bpretend\s+(?:you\s+are|to\s+be)\s+(?:a\s+)?different\b/i, "inject.identity"],
];

/** Invisible and control characters a shell ignores or a regex trips on (OpenHands' set, in ranges). */
// Built from text, a range at a time: the class names control and combining characters on
// purpose, since it takes them out.
const INVISIBLE = new RegExp(
  [
    `[${[
      "\\u200b-\\u200f\\u2060-\\u2064\\u206a-\\u206f\\ufeff\\u180b-\\u180f", // zero-width, word joiner, Mongolian
      "\\u00ad\\u034f\\u2009\\u200a\\ufff9-\\ufffc\\u2800\\u1680\\u115f\\u1160\\u3164\\uffa0\\u061c", // format
      "\\u202a-\\u202e\\u2066-\\u2069", // bidi
      "\\ufe00-\\ufe0f", // variation selectors
      "\\u0001-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f-\\u009f", // C0 (not tab, LF, CR), DEL, C1
    ].join("")}]`,
    "\\udb40[\\udc00-\\udc7f]", // tag block
    "\\udb40[\\udd00-\\uddef]", // variation selectors supplement
  ].join("|"),
  "g",
);

/** Collapses encoding evasions: NUL and invisible characters out, NFKC (fullwidth to ASCII), one space for any run. */
export const normalizeForScan = (text: string): string =>
  text.replaceAll("\u0000", "").replace(INVISIBLE, "").normalize("NFKC").replace(/\s+/g, " ");

/** Leaf strings of a JSON value, keys left out, at most `cap` characters in all. */
const leaves = (value: unknown, out: string[], budget: { left: number }, depth = 0): void => {
  if (budget.left <= 0 || depth > 32) return;
  if (typeof value === "string") {
    const s = value.slice(0, budget.left);
    out.push(s);
    budget.left -= s.length + 1;
  } else if (Array.isArray(value)) {
    for (const v of value) leaves(v, out, budget, depth + 1);
  } else if (value && typeof value === "object") {
    for (const v of Object.values(value)) leaves(v, out, budget, depth + 1);
  }
};

/** The call as the analyzer reads it: what it runs, and what the model said of it. */
type RatedCall = Pick<ActionPayload, "tool_name" | "action"> & Partial<Pick<ActionPayload, "summary" | "thought">>;

const execSegments = (call: RatedCall): string[] => {
  const { kind: _kind, ...args } = call.action;
  const out: string[] = [];
  // Arguments first: they are what an injected payload rides in, and must get the budget.
  const budget = { left: EXTRACT_CAP };
  leaves(args, out, budget);
  leaves(call.tool_name, out, budget);
  return out.map(normalizeForScan);
};

const textSegments = (call: RatedCall): string[] => {
  const out: string[] = [];
  const budget = { left: EXTRACT_CAP };
  leaves(call.summary ?? "", out, budget);
  for (const t of call.thought ?? []) leaves(t.text, out, budget);
  return out.map(normalizeForScan);
};

const firstMatch = (patterns: [RegExp, string][], text: string): string | undefined =>
  patterns.find(([re]) => re.test(text))?.[1];

/**
 * OpenHands' policy rails, per segment (one argument): a fetch piped to a shell or interpreter,
 * a raw disk write, a recursive force-delete of a critical path.
 */
const rail = (segments: string[]): string | undefined => {
  for (const seg of segments) {
    const fetches = /\b(?:curl|wget)\b/i.test(seg);
    const pipesToExec = /\|\s*(?:sudo\s+)?(?:(?:ba|z|da)?sh|python[23]?|perl|ruby|node)\b/i.test(seg);
    if (fetches && pipesToExec) return "rail.fetch_to_exec";
    if (/\bdd\b.{0,100}of=\/dev\//i.test(seg) || /\bmkfs\./i.test(seg)) return "rail.raw_disk_op";
    if (
      RECURSIVE_FORCE_RM.test(seg) &&
      /\brm\b.{0,60}\s(?:\/(?:\s|$|\*)|~\/?(?:\s|$)|\/(?:etc|usr|var|home|boot)\b)/i.test(seg)
    )
      return "rail.catastrophic_delete";
  }
  return undefined;
};

/** The local rating of one tool call: HIGH, MEDIUM or LOW, and which detector said so. */
export const ratePatternRisk = (call: RatedCall): PatternRating => {
  const exec = execSegments(call);
  const execText = exec.join(" ");
  const allText = [execText, ...textSegments(call)].join(" ");
  const high = firstMatch(execHigh, execText) ?? firstMatch(injectionHigh, allText) ?? rail(exec);
  if (high) return { risk: "HIGH", detector: high };
  const medium = firstMatch(execMedium, execText) ?? firstMatch(injectionMedium, allText);
  if (medium) return { risk: "MEDIUM", detector: medium };
  return { risk: "LOW" };
};
