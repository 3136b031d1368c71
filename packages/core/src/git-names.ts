import type { GitProvider } from "./domain.ts";

/**
 * The one definition of the repository and branch names we accept. The API validates a start
 * request with them, and the worker checks again with the same rules before it runs git (defence in
 * depth): a name can never be mistaken for an option, a path outside the workspace, or a URL.
 */

export interface RepositoryName {
  /** As requested: `owner/repo`, or `group/subgroup/repo` on GitLab. */
  fullName: string;
  /** The last path segment without `.git`: the workspace directory's name. */
  name: string;
}

// Owners and groups start with a letter, digit or underscore; a repository may also start with a dot
// (`.github`). Neither may start with `-`, so no part reads as an option.
const OWNER = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$/;
const REPOSITORY = /^[A-Za-z0-9_.][A-Za-z0-9_.-]{0,99}$/;
// GitLab alone nests groups (group/subgroup/repo).
const MAX_GITLAB_SEGMENTS = 10;

const segmentOk = (part: string, pattern: RegExp): boolean =>
  pattern.test(part) && part !== "." && !part.endsWith(".") && !part.endsWith(".lock");

/** The repository `raw` names at `provider`, or null when the name is not one we accept. */
export const parseRepositoryName = (raw: string, provider: GitProvider): RepositoryName | null => {
  const parts = raw.split("/");
  const countOk = provider === "gitlab" ? parts.length >= 2 && parts.length <= MAX_GITLAB_SEGMENTS : parts.length === 2;
  if (!countOk || raw.includes("..")) return null;
  const last = parts[parts.length - 1]!;
  if (!parts.slice(0, -1).every((p) => segmentOk(p, OWNER)) || !segmentOk(last, REPOSITORY)) return null;
  const name = last.replace(/\.git$/, "");
  return name ? { fullName: raw, name } : null;
};

/** What a provider's repository names look like, for messages. */
export const repositoryNameForm = (provider: GitProvider): string =>
  provider === "gitlab" ? "group/repo or group/subgroup/repo" : "owner/repo";

/** `git check-ref-format --branch` rules, minus anything that could read as an option or a path. */
export const isSafeBranchName = (name: string): boolean => {
  if (name.length === 0 || name.length > 255) return false;
  if (name === "@" || name.startsWith("-") || name.startsWith("/") || name.endsWith("/")) return false;
  if (name.endsWith(".") || name.endsWith(".lock") || name.includes("..") || name.includes("@{") || name.includes("//"))
    return false;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses.
  if (/[\u0000-\u0020\u007f~^:?*[\\]/.test(name)) return false;
  return name.split("/").every((part) => part.length > 0 && !part.startsWith(".") && !part.endsWith(".lock"));
};
