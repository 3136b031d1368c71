import type { RepositoryHook, Skill } from "@tern/core";
import type { SnapshotStageResults } from "@tern/db";
import type { StartContext } from "./context.ts";
import type { SnapshotPlan } from "./repo-snapshot.ts";

/**
 * What a start from a snapshot takes in place of running its hook and skill stages: what the
 * snapshot's own start got from them, for the same commit and setup script (the hook's files are in
 * the image, installed before the commit). Null: run the stages (no snapshot, a snapshot taken before
 * results were kept, or skills read under another MAX_SKILLS_BYTES, which may now refuse or cut them).
 */
export const recordedStageResults = (ctx: StartContext, snapshot: SnapshotPlan | null): SnapshotStageResults | null => {
  const recorded = snapshot?.hit?.stageResults ?? null;
  if (!recorded || recorded.maxSkillsBytes !== ctx.deps.config.MAX_SKILLS_BYTES) return null;
  return recorded;
};

/** What a start's hook and skill stages produced, to be kept with the snapshot it takes. */
export const stageResultsOf = (ctx: StartContext, hooks: RepositoryHook[], skills: Skill[]): SnapshotStageResults => ({
  hooks,
  skills,
  maxSkillsBytes: ctx.deps.config.MAX_SKILLS_BYTES,
});

/** The stage_history details of the stages a start from a snapshot goes through without running them. */
export const fromSnapshotDetail = {
  repository: (commit: string) => `from the snapshot of commit ${commit.slice(0, 12)}: cloned when it was taken`,
  setupScript: () => "ran (and succeeded) when the snapshot was taken",
  hooks: (hooks: RepositoryHook[]) =>
    hooks.length > 0
      ? `${hooks.map((h) => h.event_type).join(", ")} hook installed when the snapshot was taken`
      : "no hook to install (none when the snapshot was taken)",
  skills: (skills: Skill[]) =>
    skills.length > 0
      ? `${skills.length} skill${skills.length === 1 ? "" : "s"} (${skills.map((s) => s.name).join(", ")}) as read when the snapshot was taken`
      : "no skills (none when the snapshot was taken)",
};
