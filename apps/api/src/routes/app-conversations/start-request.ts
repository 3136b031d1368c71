import { z } from "@hono/zod-openapi";
import { gitProviders } from "@tern/core";

// GitHub's rules for owner and repository names; exactly one slash, no dot-only parts.
const REPOSITORY = /^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,98}[A-Za-z0-9_-])?\/[A-Za-z0-9_.-]{1,100}$/;

/** `git check-ref-format --branch` rules, so a branch name can never smuggle an option or a path. */
export const isValidBranchName = (name: string): boolean => {
  if (name.length === 0 || name.length > 255) return false;
  if (name === "@" || name.startsWith("-") || name.startsWith("/")) return false;
  if (name.endsWith("/") || name.endsWith(".") || name.endsWith(".lock")) return false;
  if (name.includes("..") || name.includes("@{") || name.includes("//")) return false;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses.
  if (/[\u0000-\u0020\u007f~^:?*[\\]/.test(name)) return false;
  return name.split("/").every((part) => !part.startsWith(".") && !part.endsWith(".lock"));
};

export const startConversationBody = z
  .object({
    title: z.string().max(500).nullable().optional(),
    initial_message: z
      .object({
        role: z.literal("user"),
        content: z
          .array(z.object({ type: z.literal("text"), text: z.string() }))
          .min(1)
          .max(100),
        run: z.boolean().optional().openapi({ description: "When true, the agent runs once the conversation starts" }),
      })
      .nullable()
      .optional(),
    llm_model: z.string().trim().min(1).max(200).nullable().optional(),
    selected_repository: z
      .string()
      .regex(REPOSITORY, "must be of the form owner/repo")
      .refine((v) => !v.split("/").some((p) => p === "." || p === ".."), "must be of the form owner/repo")
      .nullable()
      .optional()
      .openapi({ example: "octocat/hello-world" }),
    selected_branch: z
      .string()
      .refine(isValidBranchName, "must be a valid git branch name")
      .nullable()
      .optional()
      .openapi({ example: "main" }),
    git_provider: z.enum(gitProviders).nullable().optional(),
  })
  .openapi("StartConversationRequest");
