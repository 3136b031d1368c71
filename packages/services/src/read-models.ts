/**
 * The shapes of stored rows that the API's routes filter by or turn into records. Routes take them
 * from here, not from @tern/db: a route calls services and never a repository.
 */
export {
  type ChangeFeed,
  type ConversationFilter,
  type ConversationSortOrder,
  conversationSortOrders,
  type EventFilter,
  type EventOrder,
  type EventPage,
  type EventPosition,
  type StartTaskFilter,
  type StartTaskSortOrder,
  type StoredUserSecret,
  type StoredUserSettings,
  startTaskSortOrders,
  type Webhook,
  type WebhookDelivery,
  type WebhookDeliveryAttempt,
} from "@tern/db";
