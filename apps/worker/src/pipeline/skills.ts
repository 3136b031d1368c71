import { posix } from "node:path";
import type { Skill } from "@tern/core";
import { parse as parseYaml } from "yaml";

/**
 * Where a repository keeps its skills: OpenHands' places, in its order of precedence (the first
 * skill of a name wins). Each file found is tagged with how to read it:
 * - `third`: an instruction file of another tool at the workspace or the git root (AGENTS.md,
 *   agent.md, CLAUDE.md, GEMINI.md, .cursorrules; any case): always on;
 * - `nested`: such a file deeper in the tree: a path rule for the files under its folder;
 * - `skillmd`: an AgentSkills folder's SKILL.md, right under a skills folder: listed;
 * - `md:<folder>`: any other markdown file under a skills folder (.agents/skills, .openhands/skills,
 *   .openhands/microagents), named by its path under that folder.
 */
const THIRD_PARTY_NAMES: Record<string, string> = {
  "agents.md": "agents",
  // OpenHands names agent.md "agents" too, so that a repository with both loses one of them.
  "agent.md": "agent",
  "claude.md": "claude",
  "gemini.md": "gemini",
  ".cursorrules": "cursorrules",
};
const SKILL_FOLDERS = [".agents/skills", ".openhands/skills", ".openhands/microagents"];

const thirdPartyPattern = "agents.md|agent.md|claude.md|gemini.md|.cursorrules";

/**
 * Lists the skill files from the current directory (the workspace) into the arrays `kinds` and
 * `files` (paths relative to it), in precedence order, each file once (a symlink such as
 * CLAUDE.md -> AGENTS.md is the file it points to), at most `max` files. `git ls-files` finds the
 * nested instruction files the way OpenHands does: tracked, or untracked and not ignored.
 */
export const listSkillFilesScript = (max: number) => `
export LC_ALL=C
shopt -s nullglob dotglob
ws=$(pwd -P)
roots=("$ws")
top=$(git rev-parse --show-toplevel 2>/dev/null || true)
if [ -n "$top" ]; then top=$(cd "$top" && pwd -P); [ "$top" = "$ws" ] || roots+=("$top"); fi
declare -A seen
kinds=(); files=()
n=0
emit() {
  [ -f "$2" ] || return 0
  [ "$n" -lt ${max} ] || return 0
  local real; real=$(readlink -f -- "$2")
  [ -z "\${seen[$real]:-}" ] || return 0
  seen[$real]=1; n=$((n + 1))
  kinds+=("$1"); files+=("$(realpath -s --relative-to="$ws" -- "$2")")
}
is_third() { case "\${1,,}" in ${thirdPartyPattern}) return 0;; esac; return 1; }
for r in "\${roots[@]}"; do
  for f in "$r"/*; do is_third "\${f##*/}" && emit third "$f"; done
done
while IFS= read -r -d '' p; do emit nested "$ws/$p"; done < <(
  git -C "$ws" ls-files -z --cached --others --exclude-standard 2>/dev/null |
    grep -zEi '/(agents\\.md|agent\\.md|claude\\.md|gemini\\.md|\\.cursorrules)$' || true)
for r in "\${roots[@]}"; do
  for d in ${SKILL_FOLDERS.join(" ")}; do
    [ -d "$r/$d" ] || continue
    base=$(realpath -s --relative-to="$ws" -- "$r/$d")
    skilldirs=()
    for sub in "$r/$d"/*/; do
      for c in "$sub"*; do
        b=\${c##*/}
        if [ "\${b,,}" = skill.md ] && [ -f "$c" ]; then emit skillmd "$c"; skilldirs+=("$sub"); break; fi
      done
    done
    while IFS= read -r -d '' f; do
      inside=0
      for s in "\${skilldirs[@]}"; do case "$f" in "$s"*) inside=1;; esac; done
      [ "$inside" = 1 ] || emit "md:$base" "$f"
    done < <(find "$r/$d" \\( -type f -o -type l \\) -iname '*.md' ! -name README.md ! -iname skill.md -print0 2>/dev/null | sort -z)
  done
done
`;

/** Prints a line when the current directory has any skill source (the cheap check at clone time). */
export const hasSkillSourcesScript = (marker: string) => `(
shopt -s nullglob dotglob
found=0
for f in *; do case "\${f,,}" in ${thirdPartyPattern}) [ -f "$f" ] && found=1;; esac; done
for d in ${SKILL_FOLDERS.join(" ")}; do [ -d "$d" ] && found=1; done
[ "$found" = 1 ] || git ls-files -z --cached --others --exclude-standard 2>/dev/null |
  grep -qzEi '/(agents\\.md|agent\\.md|claude\\.md|gemini\\.md|\\.cursorrules)$' && found=1
[ "$found" = 1 ] && echo "${marker}"
true
)`;

const FRONT_MATTER = /^---[ \t]*\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)/;

const toStringList = (v: unknown): string[] => {
  if (typeof v === "string") return v.trim() ? [v.trim()] : [];
  if (Array.isArray(v))
    return v
      .filter((t): t is string | number => typeof t === "string" || typeof t === "number")
      .map(String)
      .map((t) => t.trim())
      .filter(Boolean);
  return [];
};

/** Front matter and body; front matter that does not parse is kept as content (a broken file must not stop a start). */
const splitFrontMatter = (text: string): { meta: Record<string, unknown>; content: string } => {
  const m = FRONT_MATTER.exec(text);
  if (!m) return { meta: {}, content: text.trim() };
  try {
    const parsed = parseYaml(m[1] ?? "");
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) {
      return { meta: parsed as Record<string, unknown>, content: text.slice(m[0].length).trim() };
    }
  } catch {
    // Not YAML after all: the whole file is the skill.
  }
  return { meta: {}, content: text.trim() };
};

const baseName = (path: string) => path.replace(/^.*\//, "").replace(/\.md$/i, "");

const metaString = (meta: Record<string, unknown>, key: string): string | undefined => {
  const v = meta[key];
  return typeof v === "string" && v.trim() ? v.trim() : undefined;
};

/** `paths` front matter: a list, or a comma-separated string, of globs. */
const pathsOf = (v: unknown): string[] =>
  typeof v === "string"
    ? v
        .split(",")
        .map((p) => p.trim())
        .filter(Boolean)
    : toStringList(v);

/**
 * A skill from a markdown file with optional YAML front matter, as OpenHands reads one:
 * `name`, `triggers` (keywords), `inputs` (a task: `/name` triggers it too), `paths` (a path rule:
 * its triggers are ignored), `description` (what the listing shows), `disable-model-invocation`
 * (only its triggers bring it in).
 */
export const parseSkill = (
  source: string,
  text: string,
  opts: { name?: string; agentSkills?: boolean } = {},
): Skill => {
  const { meta, content: body } = splitFrontMatter(text);
  const name = metaString(meta, "name") ?? opts.name ?? baseName(source);
  const description = metaString(meta, "description");
  const paths = pathsOf(meta.paths);
  let triggers = paths.length > 0 ? [] : toStringList(meta.triggers ?? meta.trigger);
  let content = body;
  if (paths.length === 0 && Array.isArray(meta.inputs)) {
    if (!triggers.includes(`/${name}`)) triggers = [...triggers, `/${name}`];
    content += "\n\nIf the user did not give the inputs this task needs, ask for them before you begin.";
  }
  const hidden = meta["disable-model-invocation"] ?? meta.disable_model_invocation;
  return {
    name,
    triggers,
    content,
    source,
    ...(hidden === true ? { disableModelInvocation: true } : {}),
    ...(opts.agentSkills ? { format: "agentskills" as const } : {}),
    ...(description ? { description } : {}),
    ...(paths.length > 0 ? { paths } : {}),
  };
};

/** A skill from one listed file (`kind` as listSkillFilesScript tags it), or null for a kind we do not know. */
export const skillFromFile = (kind: string, path: string, text: string): Skill | null => {
  const lower = posix.basename(path).toLowerCase();
  if (kind === "third" || kind === "nested") {
    const mapped = THIRD_PARTY_NAMES[lower] ?? baseName(path).toLowerCase();
    // Another tool's file: always on (or a path rule), whatever its front matter says.
    const { content } = splitFrontMatter(text);
    if (kind === "third") return { name: mapped, triggers: [], content, source: path };
    const dir = posix.dirname(path);
    return { name: `${mapped}:${dir}`, triggers: [], content, source: path, paths: [`${dir}/**`] };
  }
  if (kind === "skillmd")
    return parseSkill(path, text, { name: posix.basename(posix.dirname(path)), agentSkills: true });
  if (kind.startsWith("md:")) {
    const base = kind.slice(3);
    const relative = posix.relative(base, path).replace(/\.md$/i, "");
    return parseSkill(path, text, { name: relative });
  }
  return null;
};

/** The skills of the listed files, the first of each name kept (OpenHands' precedence). */
export const skillsFromFiles = (files: { kind: string; path: string; text: string }[]): Skill[] => {
  const seen = new Set<string>();
  const skills: Skill[] = [];
  for (const f of files) {
    const skill = skillFromFile(f.kind, f.path, f.text);
    if (!skill || seen.has(skill.name)) continue;
    seen.add(skill.name);
    skills.push(skill);
  }
  return skills;
};
