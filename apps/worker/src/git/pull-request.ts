import { Gitlab } from "@gitbeaker/rest";
import { Octokit } from "@octokit/rest";
import type { GitProvider } from "@tern/core";
import type { WorkerConfig } from "../config.ts";
import type { ResolvedAccess } from "./git-access.ts";

export interface PullRequestInput {
  fullName: string;
  title: string;
  body: string;
  base: string;
  head: string;
}

export interface OpenedPullRequest {
  number: number;
  url: string;
  /** It was open already (the same head and base): found, not made again. */
  existing: boolean;
}

export class PullRequestRefused extends Error {
  override name = "PullRequestRefused";
}

/**
 * The provider's REST API for a repository's base URL: the operator's GIT_API_URL_<PROVIDER> for
 * the deployment's own host, else the provider's convention (api.github.com, GitHub Enterprise's
 * /api/v3, GitLab's host itself, api.bitbucket.org/2.0).
 */
export const apiUrlOf = (access: ResolvedAccess, config: WorkerConfig, userHost: boolean): string => {
  const configured: Record<GitProvider, string | undefined> = {
    github: config.GIT_API_URL_GITHUB,
    gitlab: config.GIT_API_URL_GITLAB,
    bitbucket: config.GIT_API_URL_BITBUCKET,
  };
  const own = userHost ? undefined : configured[access.provider];
  if (own) return own.replace(/\/+$/, "");
  const base = new URL(access.base);
  if (access.provider === "github") {
    return base.hostname === "github.com" ? "https://api.github.com" : `${base.origin}/api/v3`;
  }
  if (access.provider === "bitbucket") {
    return base.hostname === "bitbucket.org" ? "https://api.bitbucket.org/2.0" : `${base.origin}/2.0`;
  }
  return base.origin;
};

const statusOf = (err: unknown): number | undefined => {
  const e = err as { status?: number; cause?: { response?: { status?: number } } };
  return e.status ?? e.cause?.response?.status;
};

const refusal = (provider: GitProvider, fullName: string, status: number | undefined, hasToken: boolean): string => {
  if (status === 401 || status === 403 || status === 404) {
    return hasToken
      ? `${provider} refused the pull request on ${fullName}: the ${provider} token was refused or cannot open pull requests there (HTTP ${status})`
      : `${provider} refused the pull request on ${fullName}: no ${provider} token (add one with POST /api/v1/git/providers)`;
  }
  return `${provider} did not open the pull request on ${fullName}${status ? ` (HTTP ${status})` : ""}`;
};

const github = async (apiUrl: string, token: string | null, pr: PullRequestInput): Promise<OpenedPullRequest> => {
  const [owner = "", repo = ""] = pr.fullName.split("/");
  // The token goes to the API's host only: a redirect elsewhere fails rather than follows.
  const octokit = new Octokit({
    ...(token ? { auth: token } : {}),
    baseUrl: apiUrl,
    request: { redirect: "error" },
    log: { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} },
  });
  try {
    const { data } = await octokit.rest.pulls.create({
      owner,
      repo,
      title: pr.title,
      body: pr.body,
      head: pr.head,
      base: pr.base,
    });
    return { number: data.number, url: data.html_url, existing: false };
  } catch (err) {
    const message = JSON.stringify((err as { response?: { data?: unknown } }).response?.data ?? "");
    if (statusOf(err) === 422 && /already exists/i.test(message)) {
      const { data } = await octokit.rest.pulls.list({
        owner,
        repo,
        head: `${owner}:${pr.head}`,
        base: pr.base,
        state: "open",
      });
      const found = data[0];
      if (found) return { number: found.number, url: found.html_url, existing: true };
    }
    if (statusOf(err) === 422) {
      throw new PullRequestRefused(`github refused the pull request on ${pr.fullName}: ${message.slice(0, 300)}`);
    }
    throw new PullRequestRefused(refusal("github", pr.fullName, statusOf(err), !!token));
  }
};

const gitlab = async (apiUrl: string, token: string | null, pr: PullRequestInput): Promise<OpenedPullRequest> => {
  const api = new Gitlab({ host: apiUrl, token: token ?? "" });
  try {
    const mr = await api.MergeRequests.create(pr.fullName, pr.head, pr.base, pr.title, { description: pr.body });
    return { number: mr.iid, url: mr.web_url, existing: false };
  } catch (err) {
    if (statusOf(err) === 409) {
      const open = await api.MergeRequests.all({
        projectId: pr.fullName,
        sourceBranch: pr.head,
        targetBranch: pr.base,
        state: "opened",
      });
      const found = open[0];
      if (found) return { number: found.iid, url: String(found.web_url), existing: true };
    }
    throw new PullRequestRefused(refusal("gitlab", pr.fullName, statusOf(err), !!token));
  }
};

/** Bitbucket Cloud's REST API 2.0, by hand: no client of it is as well kept as the other two. */
const bitbucket = async (apiUrl: string, token: string | null, pr: PullRequestInput): Promise<OpenedPullRequest> => {
  const res = await fetch(`${apiUrl}/repositories/${pr.fullName}/pullrequests`, {
    method: "POST",
    redirect: "error",
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify({
      title: pr.title,
      description: pr.body,
      source: { branch: { name: pr.head } },
      destination: { branch: { name: pr.base } },
    }),
  });
  if (!res.ok) throw new PullRequestRefused(refusal("bitbucket", pr.fullName, res.status, !!token));
  const data = (await res.json()) as { id: number; links?: { html?: { href?: string } } };
  return { number: data.id, url: data.links?.html?.href ?? "", existing: false };
};

export const openPullRequest = (
  access: ResolvedAccess,
  apiUrl: string,
  pr: PullRequestInput,
): Promise<OpenedPullRequest> => {
  if (access.provider === "github") return github(apiUrl, access.token, pr);
  if (access.provider === "gitlab") return gitlab(apiUrl, access.token, pr);
  return bitbucket(apiUrl, access.token, pr);
};
