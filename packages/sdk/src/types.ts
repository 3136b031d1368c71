import type { components, paths } from "./openapi.ts";

/**
 * Names for the API's records, all taken from the types generated from its OpenAPI document
 * (src/openapi.ts): nothing here is typed by hand, so a change to a schema reaches the SDK with the
 * next `pnpm --filter @tern/sdk generate`. Ids are 32 hex; datetimes ISO 8601 UTC.
 */
type Schemas = components["schemas"];

export type ApiKeyRecord = Schemas["ApiKey"];
export type CreateApiKeyRequest = Schemas["CreateApiKeyRequest"];
export type CreatedApiKey = Schemas["CreatedApiKey"];
export type RevokedApiKey = Schemas["RevokedApiKey"];
export type StartRequest = Schemas["StartRequest"];
export type StartTask = Schemas["StartTask"];
export type StartTaskPage = Schemas["StartTaskPage"];
export type AppConversation = Schemas["AppConversation"];
export type AppConversationPage = Schemas["AppConversationPage"];
export type Event = Schemas["Event"];
export type EventPage = Schemas["EventPage"];
export type ErrorBody = Schemas["Error"];
export type SandboxInfo = Schemas["SandboxInfo"];
export type SandboxPage = Schemas["SandboxPage"];
export type SandboxSpecInfo = Schemas["SandboxSpecInfo"];
export type SandboxSpecInfoPage = Schemas["SandboxSpecInfoPage"];
export type SkillResponse = Schemas["SkillResponse"];
export type GetSkillsResponse = Schemas["GetSkillsResponse"];
export type GetHooksResponse = Schemas["GetHooksResponse"];
export type UserInfo = Schemas["UserInfo"];
export type CreateUserRequest = Schemas["CreateUserRequest"];
export type CreatedUser = Schemas["CreatedUser"];
export type Secret = Schemas["Secret"];
export type SecretList = Schemas["SecretList"];
export type CreateSecretRequest = Schemas["CreateSecretRequest"];
export type UpdateSecretRequest = Schemas["UpdateSecretRequest"];
export type Settings = Schemas["Settings"];
export type SettingsRequest = Schemas["SettingsRequest"];
export type MetricsSnapshot = Schemas["MetricsSnapshot"];
export type AppConversationUpdateRequest = Schemas["AppConversationUpdateRequest"];
export type AppSendMessageRequest = Schemas["AppSendMessageRequest"];
export type AppSendMessageResponse = Schemas["AppSendMessageResponse"];
export type PendingMessageRequest = Schemas["PendingMessageRequest"];
export type PendingMessageResponse = Schemas["PendingMessageResponse"];
export type MessageContent = Schemas["MessageContent"];
export type SendMessageRequest = Schemas["SendMessageRequest"];

export type StartTaskStatus = StartTask["status"];
export type ExecutionStatus = AppConversation["execution_status"];
export type SandboxStatus = AppConversation["sandbox_status"];
export type GitProvider = NonNullable<StartRequest["git_provider"]>;
export type ErrorCode = ErrorBody["error"]["code"];

type QueryOf<Path extends keyof paths> = paths[Path] extends { get: { parameters: { query?: infer Q } } }
  ? NonNullable<Q>
  : never;

export type EventFilter = QueryOf<"/api/v1/conversation/{conversation_id}/events/count">;
export type EventSearch = QueryOf<"/api/v1/conversation/{conversation_id}/events/search">;
export type EventKind = NonNullable<EventFilter["kind__eq"]>;
/** `limit` (1..100) and `page_id` of the listings. */
export type PageQuery = QueryOf<"/api/v1/sandboxes/search">;
/** The conversation search's filters, sort_order and page. */
export type ConversationSearch = QueryOf<"/api/v1/app-conversations/search">;
export type ConversationFilter = QueryOf<"/api/v1/app-conversations/count">;
/** The start-task search's filters, sort_order and page. */
export type StartTaskSearch = QueryOf<"/api/v1/app-conversations/start-tasks/search">;
export type StartTaskFilter = QueryOf<"/api/v1/app-conversations/start-tasks/count">;
