import {
  type Conversation,
  type ConversationUpdateRequest,
  isSafeBranchName,
  parseRepositoryName,
  repositoryNameForm,
  ValidationError,
} from "@tern/core";
import { conversationsRepository } from "@tern/db";
import type { ServiceDeps } from "../deps.ts";
import { type Caller, ownedConversation } from "../ownership.ts";

const fieldError = (field: string, message: string) =>
  new ValidationError(`${field}: ${message}`, [{ field, in: "json", message }]);

/** PATCH: changes the fields given (OpenHands' AppConversationUpdateRequest rules). */
export const updateConversation = async (
  deps: Pick<ServiceDeps, "db">,
  caller: Caller,
  rawId: string,
  patch: ConversationUpdateRequest,
): Promise<Conversation> => {
  const conversation = await ownedConversation(deps, caller, rawId);
  const repository =
    patch.selected_repository !== undefined ? patch.selected_repository : conversation.selectedRepository;
  const provider = patch.git_provider !== undefined ? patch.git_provider : conversation.gitProvider;
  if (patch.selected_repository === null) {
    const branch = patch.selected_branch !== undefined ? patch.selected_branch : conversation.selectedBranch;
    if (branch !== null) throw fieldError("selected_branch", "must be cleared (null) with the repository");
    if (provider !== null) throw fieldError("git_provider", "must be cleared (null) with the repository");
  }
  if (repository != null && parseRepositoryName(repository, provider ?? "github") === null) {
    throw fieldError("selected_repository", `must be of the form ${repositoryNameForm(provider ?? "github")}`);
  }
  if (patch.selected_branch != null && !isSafeBranchName(patch.selected_branch)) {
    throw fieldError("selected_branch", "must be a valid git branch name");
  }
  await conversationsRepository(deps.db).update(conversation.id, {
    title: patch.title,
    public: patch.public,
    selectedRepository: patch.selected_repository,
    selectedBranch: patch.selected_branch,
    gitProvider: patch.git_provider,
  });
  return ownedConversation(deps, caller, conversation.id);
};
