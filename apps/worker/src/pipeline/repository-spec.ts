import { AppError, type GitProvider, type StartRequest } from "@tern/core";

/** What to clone, checked again here whatever the API let through (defence in depth). */
export interface RepositorySpec {
  /** `owner/repo` as requested. */
  fullName: string;
  /** Last path segment: the workspace directory's name. */
  name: string;
  branch: string | null;
  provider: GitProvider;
}

const SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$/;

const invalid = (what: string, value: string) =>
  new AppError("validation_failed", `invalid ${what} '${value.slice(0, 200)}'`);

/** Names that cannot be mistaken for an option, a path outside the workspace, or a URL. */
export const parseRepositoryName = (raw: string, provider: GitProvider): { fullName: string; name: string } => {
  const parts = raw.split("/");
  // GitLab alone nests groups (group/subgroup/repo).
  const segmentsOk = provider === "gitlab" ? parts.length >= 2 && parts.length <= 10 : parts.length === 2;
  if (
    !segmentsOk ||
    raw.includes("..") ||
    raw.includes(":") ||
    !parts.every((p) => SEGMENT.test(p) && !p.endsWith(".lock") && p !== "." && !p.endsWith("."))
  ) {
    throw invalid("repository name", raw);
  }
  const last = parts[parts.length - 1]!.replace(/\.git$/, "");
  if (!last) throw invalid("repository name", raw);
  return { fullName: raw, name: last };
};

/** `git check-ref-format --branch` rules, minus anything that could read as an option. */
export const isSafeBranchName = (name: string): boolean => {
  if (name.length === 0 || name.length > 255) return false;
  if (name === "@" || name.startsWith("-") || name.startsWith("/") || name.endsWith("/")) return false;
  if (name.endsWith(".") || name.endsWith(".lock") || name.includes("..") || name.includes("@{") || name.includes("//"))
    return false;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses.
  if (/[\u0000-\u0020\u007f~^:?*[\\]/.test(name)) return false;
  return name.split("/").every((part) => part.length > 0 && !part.startsWith(".") && !part.endsWith(".lock"));
};

/** The repository a start request asks for, or null for an empty workspace. Throws a user error when unsafe. */
export const repositorySpecOf = (request: StartRequest): RepositorySpec | null => {
  const raw = request.selected_repository?.trim();
  if (!raw) return null;
  const provider = request.git_provider ?? "github";
  const { fullName, name } = parseRepositoryName(raw, provider);
  const branch = request.selected_branch?.trim() || null;
  if (branch !== null && !isSafeBranchName(branch)) throw invalid("branch name", branch);
  return { fullName, name, branch, provider };
};

export interface GitSettings {
  GIT_BASE_URL: string;
  GIT_BASE_URL_GITHUB?: string;
  GIT_BASE_URL_GITLAB?: string;
  GIT_BASE_URL_BITBUCKET?: string;
  GIT_TOKEN?: string;
}

/** The clone URL comes from server configuration; the client only ever names `owner/repo`. */
export const cloneUrlOf = (spec: RepositorySpec, settings: GitSettings): string => {
  const base =
    (spec.provider === "github"
      ? settings.GIT_BASE_URL_GITHUB
      : spec.provider === "gitlab"
        ? settings.GIT_BASE_URL_GITLAB
        : settings.GIT_BASE_URL_BITBUCKET) ?? settings.GIT_BASE_URL;
  return `${base.replace(/\/+$/, "")}/${spec.fullName}.git`;
};

/** The user name each provider expects beside a token in HTTP Basic auth. */
const tokenUser: Record<GitProvider, string> = {
  github: "x-access-token",
  gitlab: "oauth2",
  bitbucket: "x-token-auth",
};

/**
 * Git configuration for one command, passed through the environment (GIT_CONFIG_COUNT/KEY/VALUE):
 * the token is neither in the command line nor written to .git/config.
 */
export const gitAuthEnv = (spec: RepositorySpec, token: string | undefined): Record<string, string> => {
  const env: Record<string, string> = { GIT_TERMINAL_PROMPT: "0" };
  if (!token) return env;
  const basic = Buffer.from(`${tokenUser[spec.provider]}:${token}`).toString("base64");
  return {
    ...env,
    GIT_CONFIG_COUNT: "1",
    GIT_CONFIG_KEY_0: "http.extraHeader",
    GIT_CONFIG_VALUE_0: `Authorization: Basic ${basic}`,
  };
};
