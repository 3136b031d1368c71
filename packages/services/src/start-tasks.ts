import type { StartTask } from "@tern/core";
import { type StartTaskFilter, type StartTaskSortOrder, startTaskSortKey, startTasksRepository } from "@tern/db";
import { type ListingRequest, listingScope } from "./conversations/search.ts";
import type { Caller } from "./ownership.ts";
import { type Page, type PagedReadDeps, sortedPage } from "./paging.ts";

/** The caller's start tasks matching the filters, a page in the order asked. */
export const searchStartTasks = async (
  deps: PagedReadDeps,
  caller: Caller,
  req: ListingRequest<StartTaskFilter, StartTaskSortOrder>,
): Promise<Page<StartTask>> => {
  const { filter, order, limit, pageId } = req;
  if (!filter) return { items: [], next_page_id: null };
  return sortedPage({
    secret: deps.config.cursorSecret,
    scope: listingScope(["start-tasks", caller.userId, order, filter]),
    limit,
    pageId,
    fetch: (after) => startTasksRepository(deps.db).searchForUser(caller.userId, { limit, filter, order, after }),
    keyOf: (task) => startTaskSortKey(task, order),
    toItem: (task) => task,
  });
};

/** How many of the caller's start tasks match the filters. */
export const countStartTasks = async (
  deps: Pick<PagedReadDeps, "db">,
  caller: Caller,
  filter: StartTaskFilter | null,
): Promise<number> => (filter ? startTasksRepository(deps.db).countForUser(caller.userId, filter) : 0);

/**
 * A start task as it is now, for a stream that follows one the caller was already shown to own
 * (ownedStartTasks, or the start it made itself); null once it is gone.
 */
export const startTaskNow = (deps: Pick<PagedReadDeps, "db">, taskId: string): Promise<StartTask | null> =>
  startTasksRepository(deps.db).get(taskId);
