import { RepositoryFaultError, type Skill } from "@tern/core";
import { type AcquiredSandbox, execChecked, type StartContext, type Workspace } from "./context.ts";
import { listSkillFilesScript, skillsFromFiles } from "./skills.ts";

/** Per file, when MAX_SKILLS_BYTES is off (0): the file is cut there. */
const MAX_SKILL_BYTES = 256 * 1024;
const MAX_SKILLS = 100;
/** Room for the paths and sizes besides the contents. */
const LISTING_BYTES = 1024 * 1024;

/**
 * Prints the skill files' count, then `kind NUL path NUL size NUL` for each, then (unless together
 * they are over `total`) each file's content followed by NUL: every file in one exec, and nothing
 * read of a repository whose skills are over the cap.
 */
const readScript = (perFile: number, total: number | null) => `
set -eo pipefail
${listSkillFilesScript(MAX_SKILLS)}
printf '%s\\0' "\${#files[@]}"
sum=0
for i in "\${!files[@]}"; do
  size=$(stat -L -c %s -- "\${files[$i]}")
  sum=$((sum + size))
  printf '%s\\0%s\\0%s\\0' "\${kinds[$i]}" "\${files[$i]}" "$size"
done
${total === null ? "" : `[ "$sum" -le ${total} ] || exit 0`}
for f in "\${files[@]}"; do
  head -c ${perFile} -- "$f" | tr -d '\\000'
  printf '\\0'
done
`;

const kib = (bytes: number) => `${Math.ceil(bytes / 1024)} KiB`;

const tooLarge = (files: { path: string; size: number }[], total: number, cap: number) => {
  const biggest = [...files]
    .sort((a, b) => b.size - a.size)
    .slice(0, 5)
    .map((f) => `${f.path} (${kib(f.size)})`)
    .join(", ");
  return new RepositoryFaultError(
    `the repository's skills are ${kib(total)} in all, more than MAX_SKILLS_BYTES allows (${kib(cap)}); ` +
      `the largest: ${biggest}. Shorten or remove some of them`,
  );
};

/**
 * SETTING_UP_SKILLS: the repository's skills, parsed, for the agent's system prompt (which every
 * LLM call carries). Skills over MAX_SKILLS_BYTES together fail the start as the repository's
 * fault, naming the largest files, rather than keep some and drop others: which ones the agent
 * would miss is the user's choice to make, not ours.
 */
export const setUpSkills = async (
  ctx: StartContext,
  sandbox: AcquiredSandbox,
  workspace: Workspace,
): Promise<Skill[]> => {
  // An empty workspace has no skills, and the clone's exec said whether a repository has any.
  if (!workspace.repository || workspace.hasSkills === false) return [];
  const cap = ctx.deps.config.MAX_SKILLS_BYTES;
  const perFile = cap > 0 ? cap : MAX_SKILL_BYTES;
  const maxOutputBytes = (cap > 0 ? cap : MAX_SKILLS * MAX_SKILL_BYTES) + LISTING_BYTES;
  const r = await execChecked(
    ctx,
    sandbox.ref,
    { cmd: ["bash", "-c", readScript(perFile, cap > 0 ? cap : null)], cwd: workspace.dir, maxOutputBytes },
    "reading the skills",
    "repository_fault",
  );
  const parts = r.stdout.split("\0");
  const count = Number(parts[0] ?? 0);
  const files = Array.from({ length: count }, (_, i) => ({
    kind: parts[1 + 3 * i] ?? "",
    path: parts[2 + 3 * i] ?? "",
    size: Number(parts[3 + 3 * i] ?? 0),
  }));
  const listed = files.reduce((sum, f) => sum + f.size, 0);
  if (cap > 0 && listed > cap) throw tooLarge(files, listed, cap);
  const contents = parts.slice(1 + 3 * count, 1 + 4 * count);
  // A file that grew between its size and its read (a process setup.sh left behind) is measured again.
  const read = contents.reduce((sum, c) => sum + Buffer.byteLength(c, "utf8"), 0);
  if (cap > 0 && (read > cap || r.truncated)) throw tooLarge(files, Math.max(read, listed), cap);
  const skills = skillsFromFiles(files.map((f, i) => ({ kind: f.kind, path: f.path, text: contents[i] ?? "" })));
  if (skills.length) ctx.log.info({ skills: skills.map((s) => s.name), bytes: read }, "skills loaded");
  return skills;
};
