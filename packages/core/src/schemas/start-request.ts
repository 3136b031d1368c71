import { z } from "zod";
import { gitProviders } from "../domain.ts";
import { isSafeBranchName, parseRepositoryName, repositoryNameForm } from "../git-names.ts";
import { parseId } from "../ids.ts";
import { MAX_SECRET_VALUE_BYTES, MAX_SECRETS_PER_USER, secretNameSchema } from "./users.ts";

export const textContentSchema = z.object({ type: z.literal("text"), text: z.string() }).meta({ id: "TextContent" });

export type TextContent = z.infer<typeof textContentSchema>;

/** An image the model is shown: a public http(s) URL or a `data:image/…;base64,` URL. */
const imageUrlSchema = z
  .string()
  .max(8 * 1024 * 1024)
  .refine(
    (u) => /^https?:\/\/[^\s]+$/i.test(u) || /^data:image\/[a-z0-9.+-]+;base64,[A-Za-z0-9+/=]+$/i.test(u),
    "must be an http(s) URL or a data:image/…;base64 URL",
  );

/** OpenHands' ImageContent: images handed to the model as image parts, in the order given. */
export const imageContentSchema = z
  .object({ type: z.literal("image"), image_urls: z.array(imageUrlSchema).min(1).max(20) })
  .meta({ id: "ImageContent" });

export type ImageContent = z.infer<typeof imageContentSchema>;

/** A block of a user message: text or images (OpenHands' TextContent | ImageContent). */
export const messageContentSchema = z
  .discriminatedUnion("type", [textContentSchema, imageContentSchema])
  .meta({ id: "MessageContent" });

export type MessageContent = z.infer<typeof messageContentSchema>;

/** The text blocks of a message, joined: what skills' triggers and text limits look at. */
export const textOfContent = (content: readonly MessageContent[]): string =>
  content
    .filter((c): c is TextContent => c.type === "text")
    .map((c) => c.text)
    .join("\n");

/** A uuid given dashed or as 32 hex; kept as the dashed uuid (how OpenHands serializes a plain UUID). */
const uuidInput = z
  .string()
  .transform((raw, ctx) => {
    const id = parseId(raw);
    if (id === null) {
      ctx.addIssue({ code: "custom", message: "must be a uuid (32 hex, or dashed)" });
      return z.NEVER;
    }
    return id;
  })
  .meta({ example: "0f8fad5b-d9cb-469f-a165-70867728950e" });

/** OpenHands' ConversationTrigger: what started the conversation (stored and echoed). */
export const conversationTriggers = [
  "resolver",
  "gui",
  "suggested_task",
  "openhands_api",
  "slack",
  "microagent_management",
  "jira",
  "jira_dc",
  "linear",
  "bitbucket",
  "automation",
] as const;

export const agentTypes = ["default", "plan"] as const;

/** OpenHands' SendMessageRequest as the initial message: `role` defaults to user. */
export const initialMessageSchema = z
  .object({
    role: z.literal("user").default("user"),
    content: z.array(messageContentSchema).min(1).max(100),
    run: z.boolean().optional().meta({
      description: "Accepted for compatibility: as in OpenHands, the initial message always starts the agent",
    }),
  })
  .meta({ id: "InitialMessage" });

/**
 * The start request (OpenHands' AppConversationStartRequest): the API validates it with this
 * schema, keeps what it parsed verbatim on the start task, and documents it; the worker reads it
 * back as this type. Unknown fields are dropped, as FastAPI does.
 */
export const startRequestSchema = z
  .object({
    sandbox_id: z.string().max(200).nullable().optional().meta({
      description:
        "Accepted and echoed. Each conversation gets its own hardened sandbox here, so it is not used to share one.",
    }),
    conversation_id: uuidInput.nullable().optional().meta({
      description: "The id the conversation will have (409 when it is taken); one is made when absent",
    }),
    title: z.string().max(500).nullable().optional().meta({
      description: "`Conversation ` + the first 5 hex of the conversation's id when absent",
    }),
    initial_message: initialMessageSchema.nullable().optional(),
    system_message_suffix: z
      .string()
      .max(64 * 1024)
      .nullable()
      .optional()
      .meta({ description: "Appended to the agent's system prompt" }),
    llm_model: z.string().trim().min(1).max(200).nullable().optional(),
    selected_repository: z.string().nullable().optional().meta({
      description: "`owner/repo`; on GitLab also `group/subgroup/repo`. Cloned from the server's configured host.",
      example: "octocat/hello-world",
    }),
    selected_branch: z
      .string()
      .refine(isSafeBranchName, "must be a valid git branch name")
      .nullable()
      .optional()
      .meta({ description: "The repository's default branch when absent", example: "main" }),
    git_provider: z.enum(gitProviders).nullable().optional().meta({ description: "github when absent" }),
    trigger: z.enum(conversationTriggers).nullable().optional().meta({ description: "Stored and echoed" }),
    pr_number: z.array(z.number().int().nonnegative()).max(100).optional().meta({ description: "Stored and echoed" }),
    parent_conversation_id: uuidInput
      .nullable()
      .optional()
      .meta({
        description:
          "One of the caller's conversations (404 otherwise). Repository, branch, provider and model are inherited " +
          "from it when not given; the parent lists the new conversation in sub_conversation_ids.",
      }),
    secrets: z
      .record(
        secretNameSchema,
        z.string().refine((v) => Buffer.byteLength(v, "utf8") <= MAX_SECRET_VALUE_BYTES, "at most 64 KiB"),
      )
      .refine((r) => Object.keys(r).length <= MAX_SECRETS_PER_USER, `at most ${MAX_SECRETS_PER_USER} secrets`)
      .nullable()
      .optional()
      .meta({
        description:
          "Write-only: environment variables of the agent's commands, over the user's own secrets. Stored sealed, " +
          "never echoed (`request.secrets` shows `**********`), masked as <secret:NAME> in events",
      }),
    agent_type: z.enum(agentTypes).optional().meta({
      description: "`plan`: the agent is told to plan and not change files (default `default`)",
    }),
    public: z.boolean().nullable().optional().meta({ description: "Stored and echoed" }),
    sandbox_spec_id: z
      .string()
      .max(255)
      .nullable()
      .optional()
      .meta({
        description:
          "tern extension (not in OpenHands' request): the sandbox spec the conversation runs in, an id of GET " +
          "/api/v1/sandbox-specs (its image). Absent: the default spec (SANDBOX_IMAGE). A spec's first start on an " +
          "engine prepares its image (WAITING_FOR_SANDBOX, detail `preparing image …`)",
        example: "python:3.12",
      }),
    fresh: z
      .boolean()
      .nullable()
      .optional()
      .meta({
        description:
          "tern: `true` clones and runs `.openhands/setup.sh` anew, never starting from a snapshot of an earlier start " +
          "of the same repository and commit (the new sandbox then replaces that snapshot)",
      }),
  })
  // The repository's form depends on the provider, so it is checked on the whole request.
  .superRefine((request, ctx) => {
    const repository = request.selected_repository;
    if (repository == null) return;
    const provider = request.git_provider ?? "github";
    if (parseRepositoryName(repository, provider) === null) {
      ctx.addIssue({
        code: "custom",
        path: ["selected_repository"],
        message: `must be of the form ${repositoryNameForm(provider)}`,
      });
    }
  })
  .meta({ id: "StartRequest" });

export type StartRequest = z.infer<typeof startRequestSchema>;
