import {
  type GitProvider,
  isSafeBranchName,
  parseRepositoryName,
  type StartRequest,
  ValidationError,
} from "@tern/core";

/**
 * What to clone, checked again here whatever the API let through (defence in depth), with the same
 * rules the API validates with (@tern/core's parseRepositoryName and isSafeBranchName).
 */
export interface RepositorySpec {
  /** `owner/repo` (or `group/subgroup/repo` on GitLab) as requested. */
  fullName: string;
  /** Last path segment: the workspace directory's name. */
  name: string;
  branch: string | null;
  provider: GitProvider;
}

const invalid = (what: string, value: string) => new ValidationError(`invalid ${what} '${value.slice(0, 200)}'`);

/** The repository a start request asks for, or null for an empty workspace. Throws a user error when unsafe. */
export const repositorySpecOf = (request: StartRequest): RepositorySpec | null => {
  const raw = request.selected_repository?.trim();
  if (!raw) return null;
  const provider = request.git_provider ?? "github";
  const repository = parseRepositoryName(raw, provider);
  if (!repository) throw invalid("repository name", raw);
  const branch = request.selected_branch?.trim() || null;
  if (branch !== null && !isSafeBranchName(branch)) throw invalid("branch name", branch);
  return { ...repository, branch, provider };
};

export interface GitSettings {
  GIT_BASE_URL: string;
  GIT_BASE_URL_GITHUB?: string;
  GIT_BASE_URL_GITLAB?: string;
  GIT_BASE_URL_BITBUCKET?: string;
}

/** Every git host a clone may come from, as host and port: the one thing sandboxes must reach on a private network. */
export const gitServicesOf = (settings: GitSettings): { host: string; port: number }[] => {
  const bases = [
    settings.GIT_BASE_URL,
    settings.GIT_BASE_URL_GITHUB,
    settings.GIT_BASE_URL_GITLAB,
    settings.GIT_BASE_URL_BITBUCKET,
  ];
  const services = new Map<string, { host: string; port: number }>();
  for (const base of bases) {
    if (!base) continue;
    const url = new URL(base);
    const port = Number(url.port || (url.protocol === "https:" ? 443 : 80));
    const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
    services.set(`${host}:${port}`, { host, port });
  }
  return [...services.values()];
};
