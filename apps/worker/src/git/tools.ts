import type { GitToolRequest, GitToolResult, GitToolRunner } from "@tern/agent";
import { DomainError, isSafeBranchName, maskSecrets } from "@tern/core";
import { pullRequestsRepository } from "@tern/db";
import type { WorkerDeps } from "../deps.ts";
import { type ResolvedAccess, resolveGitAccess } from "./git-access.ts";
import { apiUrlOf, openPullRequest, PullRequestRefused } from "./pull-request.ts";
import { PushRefused, pushFromSandbox } from "./push.ts";

const failed = (text: string): GitToolResult => ({ text, isError: true });

/** Never the token in what the model (and the events) read, whatever a provider echoed. */
const clean = (text: string, access: ResolvedAccess | null): string =>
  access?.token ? maskSecrets(text, { [`${access.provider}_token`]: access.token }) : text;

/**
 * The git tools the agent loop runs on the worker: the sandbox has the commits, the
 * worker has the user's token. Every refusal is an observation the model reads, naming the
 * provider, never the token; a passing fault (the sandbox engine, Postgres) throws, and the run's
 * job is retried.
 */
export const createGitTools = (
  deps: Pick<WorkerDeps, "db" | "config" | "secretBox" | "sandboxes" | "logger">,
): GitToolRunner => {
  const accessFor = async ({ conversation }: GitToolRequest) => {
    if (!conversation.selectedRepository) return null;
    return resolveGitAccess(
      deps,
      conversation.userId,
      conversation.gitProvider ?? "github",
      conversation.selectedRepository,
    );
  };

  return {
    async push(req, { branch }) {
      const { conversation } = req;
      if (!conversation.selectedRepository) return failed("This conversation has no repository to push to.");
      if (!isSafeBranchName(branch)) return failed(`'${branch.slice(0, 100)}' is not a branch name git_push accepts.`);
      let access: ResolvedAccess | null = null;
      try {
        access = await accessFor(req);
        if (!access) return failed("This conversation has no repository to push to.");
        const { commit } = await pushFromSandbox(deps.sandboxes, req.sandboxRef, {
          workspaceDir: conversation.workspaceDir,
          branch,
          fullName: conversation.selectedRepository,
          access,
        });
        deps.logger.info(
          { conversation_id: conversation.id, branch, commit, provider: access.provider },
          "pushed a branch from the sandbox",
        );
        return {
          text: `Pushed branch '${branch}' (${commit.slice(0, 12)}) to ${conversation.selectedRepository} on ${access.provider}.`,
          isError: false,
        };
      } catch (err) {
        if (err instanceof PushRefused || err instanceof DomainError) return failed(clean(err.message, access));
        throw err;
      }
    },

    async createPullRequest(req, args) {
      const { conversation } = req;
      const fullName = conversation.selectedRepository;
      if (!fullName) return failed("This conversation has no repository to open a pull request on.");
      for (const b of [args.base, args.head]) {
        if (!isSafeBranchName(b)) return failed(`'${b.slice(0, 100)}' is not a branch name.`);
      }
      let access: ResolvedAccess | null = null;
      try {
        access = await accessFor(req);
        if (!access) return failed("This conversation has no repository to open a pull request on.");
        const pr = await openPullRequest(access, apiUrlOf(access, deps.config, access.userHost), {
          fullName,
          title: args.title,
          body: args.body,
          base: args.base,
          head: args.head,
        });
        await pullRequestsRepository(deps.db).record({
          conversationId: conversation.id,
          provider: access.provider,
          repository: fullName,
          number: pr.number,
          url: pr.url,
          head: args.head,
          base: args.base,
        });
        deps.logger.info(
          { conversation_id: conversation.id, pr_number: pr.number, provider: access.provider },
          "pull request opened",
        );
        const what = access.provider === "gitlab" ? "Merge request" : "Pull request";
        return {
          text: `${what} #${pr.number} ${pr.existing ? "was already open" : "opened"}: ${pr.url}`,
          isError: false,
          url: pr.url,
          number: pr.number,
        };
      } catch (err) {
        if (err instanceof PullRequestRefused || err instanceof DomainError) return failed(clean(err.message, access));
        throw err;
      }
    },
  };
};
