import type { Skill } from "@tern/core";
import { type AcquiredSandbox, execChecked, type StartContext, type Workspace } from "./context.ts";
import { parseSkill, skillGlobs } from "./skills.ts";

const MAX_SKILL_BYTES = 256 * 1024;
const MAX_SKILLS = 100;

/** Prints each skill file as `path NUL content NUL`: every file in one exec. */
const READ_SCRIPT = `
shopt -s nullglob
n=0
for f in ${skillGlobs.join(" ")}; do
  [ -f "$f" ] || continue
  n=$((n+1)); [ "$n" -le ${MAX_SKILLS} ] || break
  printf '%s\\0' "$f"
  head -c ${MAX_SKILL_BYTES} -- "$f" | tr -d '\\000'
  printf '\\0'
done
`;

/** SETTING_UP_SKILLS: the repository's skills, parsed, for the agent's system prompt. */
export const setUpSkills = async (
  ctx: StartContext,
  sandbox: AcquiredSandbox,
  workspace: Workspace,
): Promise<Skill[]> => {
  // An empty workspace has no skills, and the clone's exec said whether a repository has any.
  if (!workspace.repository || workspace.hasSkills === false) return [];
  const r = await execChecked(
    ctx,
    sandbox.containerId,
    { cmd: ["bash", "-c", READ_SCRIPT], cwd: workspace.dir, maxOutputBytes: 2 * MAX_SKILLS * MAX_SKILL_BYTES },
    "reading the skills",
  );
  const parts = r.stdout.split("\0");
  const skills: Skill[] = [];
  for (let i = 0; i + 1 < parts.length; i += 2) skills.push(parseSkill(parts[i]!, parts[i + 1]!));
  if (skills.length) ctx.log.info({ skills: skills.map((s) => s.name) }, "skills loaded");
  return skills;
};
