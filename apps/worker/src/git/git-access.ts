import { type GitProvider, nonPublicAddressOf, ValidationError } from "@tern/core";
import { gitProviderSealContext, gitProvidersRepository } from "@tern/db";
import type { WorkerDeps } from "../deps.ts";
import type { GitAccess } from "./run-git.ts";

/** The deployment's base URL of a provider: GIT_BASE_URL_<PROVIDER>, else GIT_BASE_URL. */
const configuredBaseOf = (provider: GitProvider, config: WorkerDeps["config"]): string =>
  (provider === "github"
    ? config.GIT_BASE_URL_GITHUB
    : provider === "gitlab"
      ? config.GIT_BASE_URL_GITLAB
      : config.GIT_BASE_URL_BITBUCKET) ?? config.GIT_BASE_URL;

/** A user's `host` as a base URL: `host[:port]` means https; a URL keeps its scheme. */
const baseOfHost = (host: string): string => (/^https?:\/\//i.test(host) ? host : `https://${host}`);

/**
 * Refuses a user's host that is plain http or resolves to an address of the deployment's own
 * networks, unless GIT_ALLOW_PRIVATE_HOSTS: the worker would otherwise fetch from wherever a user points it.
 */
const checkUserHost = async (base: string, provider: GitProvider, allowPrivate: boolean): Promise<void> => {
  if (allowPrivate) return;
  const url = new URL(base);
  if (url.protocol !== "https:") throw new ValidationError(`the ${provider} host must be reached over https`);
  const refused = await nonPublicAddressOf(url.hostname);
  if (refused) {
    throw new ValidationError(
      `the ${provider} host ${url.host} is on a private network, which this deployment does not reach`,
    );
  }
};

export interface ResolvedAccess extends GitAccess {
  /** Whose token: the user's own, the deployment's shared GIT_TOKEN, or none (public repositories only). */
  source: "user" | "shared" | "none";
  /** The base URL the repository is under (its API is found from it). */
  base: string;
  /** The base is the user's own host, not the deployment's. */
  userHost: boolean;
}

/**
 * How to reach `fullName` for `userId`: the user's own account for that provider (its host and
 * token), else the deployment's host with GIT_TOKEN when GIT_TOKEN_SHARED, else no token at all.
 */
export const resolveGitAccess = async (
  deps: Pick<WorkerDeps, "db" | "config" | "secretBox">,
  userId: string,
  provider: GitProvider,
  fullName: string,
): Promise<ResolvedAccess> => {
  const { config } = deps;
  const own = await gitProvidersRepository(deps.db).findForUser(userId, provider);
  const configured = configuredBaseOf(provider, config);
  let base = configured;
  let token: string | null = null;
  let source: ResolvedAccess["source"] = "none";
  if (own) {
    token = deps.secretBox.open(own.tokenSealed, gitProviderSealContext(userId, provider));
    source = "user";
    if (own.host) {
      base = baseOfHost(own.host);
      await checkUserHost(base, provider, config.GIT_ALLOW_PRIVATE_HOSTS);
    }
  } else if (config.GIT_TOKEN_SHARED && config.GIT_TOKEN) {
    token = config.GIT_TOKEN;
    source = "shared";
  }
  const clean = new URL(base);
  // Credentials in a configured URL would land in .git/config: never kept.
  clean.username = "";
  clean.password = "";
  const url = `${clean.toString().replace(/\/+$/, "")}/${fullName}.git`;
  const allowHttp = clean.protocol === "http:" && (base === configured || config.GIT_ALLOW_PRIVATE_HOSTS);
  const userHost = base !== configured;
  return { url, provider, token, allowHttp, source, base: clean.toString().replace(/\/+$/, ""), userHost };
};
