import type { RepoSnapshot } from "@tern/db";
import { describe, expect, it } from "vitest";
import type { StartContext } from "./context.ts";
import type { SnapshotPlan } from "./repo-snapshot.ts";
import { recordedStageResults, stageResultsOf } from "./snapshot-stages.ts";

const ctxWithCap = (maxSkillsBytes: number) =>
  ({ deps: { config: { MAX_SKILLS_BYTES: maxSkillsBytes } } }) as unknown as StartContext;

const skill = { name: "deployer", triggers: ["deploy"], content: "Run make deploy.", source: ".openhands/skills/d.md" };

const planWith = (stageResults: RepoSnapshot["stageResults"]): SnapshotPlan =>
  ({ hit: { stageResults } as RepoSnapshot }) as SnapshotPlan;

describe("recordedStageResults", () => {
  it("takes what the snapshot's start recorded, under the same skills cap", () => {
    const recorded = stageResultsOf(ctxWithCap(1024), [], [skill]);
    expect(recordedStageResults(ctxWithCap(1024), planWith(recorded))).toEqual(recorded);
  });

  it("reads the skills again under another cap: the cap now may refuse or cut them", () => {
    const recorded = stageResultsOf(ctxWithCap(1024), [], [skill]);
    expect(recordedStageResults(ctxWithCap(10), planWith(recorded))).toBeNull();
  });

  it("runs the stages without a snapshot, or from one that recorded nothing", () => {
    expect(recordedStageResults(ctxWithCap(1024), null)).toBeNull();
    expect(recordedStageResults(ctxWithCap(1024), { hit: null } as SnapshotPlan)).toBeNull();
    expect(recordedStageResults(ctxWithCap(1024), planWith(null))).toBeNull();
  });
});
