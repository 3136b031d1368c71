/**
 * The git scripts the worker runs inside a sandbox, as the sandbox user (never on this host), each
 * written once: the workspace's diff since its start (the app server's /diff), and the agent
 * server's view of a repository (its changes, one file's diff). They share how a repository is
 * entered and what a tree without commits is compared with; their exit codes say why they stopped.
 */

/** git's empty tree: what a workspace without commits is compared with. */
export const EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/** Exit codes the scripts stop with, beside git's own. */
export const GIT_EXIT = { notARepository: 3, badRef: 4 } as const;

/** `enter_repo DIR`: into the top of the repository DIR is in, or exit notARepository. */
const ENTER_REPO = `
enter_repo() {
  cd -- "$1" 2>/dev/null || exit ${GIT_EXIT.notARepository}
  top=$(git rev-parse --show-toplevel 2>/dev/null) || exit ${GIT_EXIT.notARepository}
  cd -- "$top"
}
`;

/**
 * `pick_ref REF`: the ref changes are compared with, as OpenHands' get_valid_ref picks it: the one
 * asked for, else the merge-base with the upstream branch, else with origin's default branch,
 * else HEAD, else the empty tree (a repository without commits).
 */
const PICK_REF = `
pick_ref() {
  if [ -n "$1" ]; then
    case "$1" in -*) exit ${GIT_EXIT.badRef} ;; esac
    git rev-parse --verify -q "$1^{commit}" >/dev/null 2>&1 || exit ${GIT_EXIT.badRef}
    printf '%s' "$1"; return
  fi
  for up in '@{upstream}' 'origin/HEAD' 'origin/main' 'origin/master'; do
    if git rev-parse --verify -q "$up" >/dev/null 2>&1; then
      mb=$(git merge-base HEAD "$up" 2>/dev/null) && { printf '%s' "$mb"; return; }
    fi
  done
  if git rev-parse --verify -q HEAD >/dev/null 2>&1; then printf HEAD; return; fi
  printf '${EMPTY_TREE}'
}
`;

/**
 * `git diff` of the workspace ($1) against the commit the conversation started from, untracked
 * files included (through a throw-away copy of the index, so the agent's own index is untouched;
 * ignored files stay out). The start commit is the oldest entry of HEAD's reflog when that is the
 * clone; a workspace that started empty is compared with the empty tree, which stderr's last line
 * names.
 */
const WORKSPACE_DIFF = `
${ENTER_REPO}
enter_repo "$1"
first=$(git reflog show --format='%H %gs' HEAD 2>/dev/null | tail -n 1)
case "$first" in
  *" clone: "*) start=\${first%% *} ;;
  *) start=${EMPTY_TREE} ;;
esac
index=$(mktemp) || exit 70
trap 'rm -f "$index"' EXIT
real=$(git rev-parse --git-path index)
[ -f "$real" ] && cp -- "$real" "$index" || rm -f "$index"
export GIT_INDEX_FILE="$index"
git add -A -- . >/dev/null 2>&1 || exit 71
printf '%s\\n' "$start" >&2
git -c core.quotepath=off diff --cached --no-color --no-ext-diff --find-renames "$start"
`;

/** The repository at $1: `git diff --name-status` against the ref $2, then the untracked files, NUL-separated. */
const CHANGES = `
${ENTER_REPO}
${PICK_REF}
enter_repo "$1"
ref=$(pick_ref "$2") || exit ${GIT_EXIT.badRef}
git -c core.quotepath=off --no-pager diff --name-status -z --find-renames "$ref" -- || exit 72
printf '\\0--untracked--\\0'
git -c core.quotepath=off --no-pager ls-files -z --others --exclude-standard || exit 73
`;

/** The file $1 as it is now (stdout) and at the ref $2 (after a marker), for one file's diff. */
const FILE_DIFF = `
${ENTER_REPO}
${PICK_REF}
f="$1"
enter_repo "$(dirname -- "$f")"
rel=\${f#"$top"/}
ref=$(pick_ref "$2") || exit ${GIT_EXIT.badRef}
if [ -f "$f" ]; then printf 'M'; cat -- "$f"; else printf 'N'; fi
printf '\\0--original--\\0'
if git cat-file -e "$ref:$rel" 2>/dev/null; then printf 'O'; git show "$ref:$rel"; else printf 'N'; fi
`;

const SCRIPTS = { "workspace-diff": WORKSPACE_DIFF, changes: CHANGES, "file-diff": FILE_DIFF } as const;

/** The command that runs script `name` in a sandbox with its arguments. */
export const gitScript = (name: keyof typeof SCRIPTS, ...args: string[]): string[] => [
  "bash",
  "-c",
  SCRIPTS[name],
  name,
  ...args,
];
