import type { StartTask } from "@tern/core";
import { startTaskSortKey, startTasksRepository } from "@tern/db";
import { ownedListing, type PagedReadDeps } from "./paging.ts";

const startTasks = ownedListing("start-tasks", startTasksRepository, startTaskSortKey);

/** The caller's start tasks matching the filters, a page in the order asked. */
export const searchStartTasks = startTasks.search;

/** How many of the caller's start tasks match the filters. */
export const countStartTasks = startTasks.count;

/**
 * A start task as it is now, for a stream that follows one the caller was already shown to own
 * (ownedStartTasks, or the start it made itself); null once it is gone.
 */
export const startTaskNow = (deps: Pick<PagedReadDeps, "db">, taskId: string): Promise<StartTask | null> =>
  startTasksRepository(deps.db).get(taskId);
