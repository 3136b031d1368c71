import type { Conversation } from "@tern/core";
import {
  type ConversationFilter,
  type ConversationSortOrder,
  conversationSortKey,
  conversationsRepository,
} from "@tern/db";
import type { Caller } from "../ownership.ts";
import { type Page, type PagedReadDeps, sortedPage } from "../paging.ts";

/** A listing's search: the caller's rows matching `filter` in `order`, a page of `limit` after `pageId`. */
export interface ListingRequest<Filter, Order> {
  /** Null: the filter can match nothing (an id that is no id); the answer is empty. */
  filter: Filter | null;
  order: Order;
  limit: number;
  pageId: string | undefined;
}

/** What a page cursor is bound to: the listing, its owner, its order and every filter. */
export const listingScope = (parts: unknown[]): string => JSON.stringify(parts);

/** The caller's conversations matching the filters, a page in the order asked. */
export const searchConversations = async (
  deps: PagedReadDeps,
  caller: Caller,
  req: ListingRequest<ConversationFilter, ConversationSortOrder>,
): Promise<Page<Conversation>> => {
  const { filter, order, limit, pageId } = req;
  if (!filter) return { items: [], next_page_id: null };
  return sortedPage({
    secret: deps.config.cursorSecret,
    scope: listingScope(["app-conversations", caller.userId, order, filter]),
    limit,
    pageId,
    fetch: (after) => conversationsRepository(deps.db).searchForUser(caller.userId, { limit, filter, order, after }),
    keyOf: (conv) => conversationSortKey(conv, order),
    toItem: (conv) => conv,
  });
};

/** How many of the caller's conversations match the filters. */
export const countConversations = async (
  deps: Pick<PagedReadDeps, "db">,
  caller: Caller,
  filter: ConversationFilter | null,
): Promise<number> => (filter ? conversationsRepository(deps.db).countForUser(caller.userId, filter) : 0);
