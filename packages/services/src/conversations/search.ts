import { conversationSortKey, conversationsRepository } from "@tern/db";
import { ownedListing } from "../paging.ts";

const conversations = ownedListing("app-conversations", conversationsRepository, conversationSortKey);

/** The caller's conversations matching the filters, a page in the order asked. */
export const searchConversations = conversations.search;

/** How many of the caller's conversations match the filters. */
export const countConversations = conversations.count;
