import type { JobName, JobPayload } from "@tern/queue";
import type { Job } from "bullmq";

/** A processor of one job of the catalog; it gets the payload already checked against the job's schema. */
export type JobProcessor<N extends JobName> = (job: Job<JobPayload<N>>, token?: string) => Promise<unknown>;
