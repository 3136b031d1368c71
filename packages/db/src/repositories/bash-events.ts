import type { Sandbox } from "@tern/core";
import { type ColumnType, type Generated, type Kysely, type Selectable, sql } from "kysely";
import type { Database, SandboxesTable } from "../schema.ts";
import { toSandbox } from "./sandboxes.ts";

/** The table of migration 20261128_0220 (kept out of schema.ts: only this repository reads it). */
interface BashEventsTable {
  id: string;
  position: Generated<string>;
  sandbox_id: string;
  kind: "BashCommand" | "BashOutput";
  command_id: string | null;
  timestamp: ColumnType<string | Date, string | Date, never>;
  command: string | null;
  cwd: string | null;
  timeout: number | null;
  order: number | null;
  exit_code: number | null;
  stdout: string | null;
  stderr: string | null;
  worker_id: string | null;
  dispatched_at: ColumnType<string | Date | null, string | Date | null | undefined, string | Date | null>;
  finished_at: ColumnType<string | Date | null, string | Date | null | undefined, string | Date | null>;
}

type BashDb = Database & { bash_events: BashEventsTable };

export interface BashCommandRow {
  kind: "BashCommand";
  id: string;
  position: string;
  sandboxId: string;
  timestamp: Date;
  command: string;
  cwd: string | null;
  timeout: number;
  workerId: string | null;
  dispatchedAt: Date | null;
  finishedAt: Date | null;
}

export interface BashOutputRow {
  kind: "BashOutput";
  id: string;
  position: string;
  sandboxId: string;
  timestamp: Date;
  commandId: string;
  order: number;
  exitCode: number | null;
  stdout: string | null;
  stderr: string | null;
}

export type BashEventRow = BashCommandRow | BashOutputRow;

export interface BashOutputInput {
  id: string;
  commandId: string;
  order: number;
  exitCode: number | null;
  stdout: string | null;
  stderr: string | null;
  timestamp?: Date;
}

export interface BashEventQuery {
  sandboxId: string;
  kind?: "BashCommand" | "BashOutput";
  commandId?: string;
  timestampGte?: Date;
  timestampLt?: Date;
  /** BashOutput events with an order above this (commands have none and are kept). */
  orderGt?: number;
  desc?: boolean;
  /** The position of the first event of the page (a previous page's next_page_id). */
  pageId?: string;
  limit: number;
}

const dateOf = (v: string | Date | null): Date | null => (v === null ? null : v instanceof Date ? v : new Date(v));

const rowOf = (r: Selectable<BashEventsTable>): BashEventRow => {
  const common = {
    id: r.id,
    position: String(r.position),
    sandboxId: r.sandbox_id,
    timestamp: dateOf(r.timestamp) as Date,
  };
  return r.kind === "BashCommand"
    ? {
        kind: "BashCommand",
        ...common,
        command: r.command ?? "",
        cwd: r.cwd,
        timeout: r.timeout ?? 300,
        workerId: r.worker_id,
        dispatchedAt: dateOf(r.dispatched_at),
        finishedAt: dateOf(r.finished_at),
      }
    : {
        kind: "BashOutput",
        ...common,
        commandId: r.command_id ?? "",
        order: r.order ?? 0,
        exitCode: r.exit_code,
        stdout: r.stdout,
        stderr: r.stderr,
      };
};

/** A command the API stores, before any worker has it. */
interface NewBashCommand {
  id: string;
  sandboxId: string;
  command: string;
  cwd: string | null;
  timeout: number;
  timestamp?: Date;
}

/**
 * The agent-server's bash events of each sandbox (commands and their outputs), in the order they
 * were emitted. The API writes commands; the worker running one writes its outputs; either may
 * write the last output of a command whose worker died (the first to lock the command wins).
 */
export const bashEventsRepository = (database: Kysely<Database>) => {
  const db = database as unknown as Kysely<BashDb>;
  return {
    async insertCommand(c: NewBashCommand): Promise<BashCommandRow> {
      const row = await db
        .insertInto("bash_events")
        .values({
          id: c.id,
          sandbox_id: c.sandboxId,
          kind: "BashCommand",
          command_id: null,
          timestamp: c.timestamp ?? new Date(),
          command: c.command,
          cwd: c.cwd,
          timeout: c.timeout,
          order: null,
          exit_code: null,
          stdout: null,
          stderr: null,
          worker_id: null,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      return rowOf(row) as BashCommandRow;
    },

    /**
     * insertCommand for a sandbox that is RUNNING, in one statement (one round trip on the hot
     * path of execute_bash_command): the sandbox's status and engine are read in it. `command`
     * is null when the sandbox is not running (nothing written; `status` says why) and the whole
     * answer null when there is no such sandbox.
     * `flushedLater`: the commit does not wait for the WAL flush (synchronous_commit off, for this
     * statement only), for a caller that answers only after a later synchronous commit (the
     * command's last output), which flushes this one with it: durable before anyone is answered.
     * `maxInFlight`: nothing is written (`full`) while the sandbox has that many commands
     * unfinished (counted in the same statement, by bash_events_running_idx; two stored at the
     * same instant may both pass).
     */
    async insertCommandIfRunning(
      c: NewBashCommand,
      opts: { flushedLater?: boolean; maxInFlight?: number } = {},
    ): Promise<{ status: string; engineId: string | null; full: boolean; command: BashCommandRow | null } | null> {
      const at = c.timestamp ?? new Date();
      const max = opts.maxInFlight && opts.maxInFlight > 0 ? opts.maxInFlight : null;
      const result = await sql<{ status: string; engine_id: string | null; position: string | null; full: boolean }>`
        with s as (
          select id, status, engine_id,
            ${max}::int is not null and (
              select count(*) from bash_events r
              where r.sandbox_id = sandboxes.id and r.kind = 'BashCommand' and r.finished_at is null
            ) >= ${max}::int as full
          from sandboxes where id = ${c.sandboxId}::uuid),
        cfg as (select set_config('synchronous_commit', ${opts.flushedLater ? "off" : "on"}, true)),
        ins as (
          insert into bash_events (id, sandbox_id, kind, "timestamp", command, cwd, timeout)
          select ${c.id}::uuid, s.id, 'BashCommand', ${at}::timestamptz, ${c.command}::text, ${c.cwd}::text, ${c.timeout}::int
          from s cross join cfg where s.status = 'RUNNING' and not s.full
          returning position)
        select s.status, s.engine_id, s.full, ins.position from s left join ins on true`.execute(db);
      const row = result.rows[0];
      if (!row) return null;
      return {
        status: row.status,
        engineId: row.engine_id,
        full: row.full,
        command:
          row.position === null
            ? null
            : {
                kind: "BashCommand",
                id: c.id,
                position: String(row.position),
                sandboxId: c.sandboxId,
                timestamp: at,
                command: c.command,
                cwd: c.cwd,
                timeout: c.timeout,
                workerId: null,
                dispatchedAt: null,
                finishedAt: null,
              },
      };
    },

    /**
     * dispatch, with the sandbox read in the same statement (one round trip where the worker made
     * three): the sandbox as it is and its conversation's workspace directory (null: no
     * conversation), and the command taken (null: no such unfinished command of this sandbox, or
     * the sandbox is not RUNNING, in which case nothing is written). Null when there is no sandbox.
     * Its commit does not wait for the WAL flush (synchronous_commit off, this statement only): the
     * mark only tells the orphan rule which worker runs the command; lost in a Postgres crash, the
     * command reads as never taken and that rule still ends it.
     */
    async dispatchInSandbox(
      sandboxId: string,
      commandId: string,
      workerId: string,
      at: Date,
    ): Promise<{ sandbox: Sandbox; workspaceDir: string | null; command: BashCommandRow | null } | null> {
      type Row = SandboxesTable & {
        workspace_dir: string | null;
        c_position: string | null;
        c_timestamp: string | Date | null;
        c_command: string | null;
        c_cwd: string | null;
        c_timeout: number | null;
      };
      const result = await sql<Row>`
        with s as (
          select s.*, c.workspace_dir from sandboxes s left join conversations c on c.id = s.conversation_id
          where s.id = ${sandboxId}::uuid),
        cfg as (select set_config('synchronous_commit', 'off', true) as v),
        d as (
          update bash_events set worker_id = ${workerId}, dispatched_at = ${at}::timestamptz
          where id = ${commandId}::uuid and kind = 'BashCommand' and finished_at is null
            and sandbox_id = ${sandboxId}::uuid and exists (select 1 from s where s.status = 'RUNNING')
            and exists (select 1 from cfg where v is not null)
          returning position, "timestamp", command, cwd, timeout)
        select s.*, d.position as c_position, d."timestamp" as c_timestamp, d.command as c_command,
          d.cwd as c_cwd, d.timeout as c_timeout
        from s left join d on true`.execute(db);
      const row = result.rows[0];
      if (!row) return null;
      return {
        sandbox: toSandbox(row as never),
        workspaceDir: row.workspace_dir,
        command:
          row.c_position === null
            ? null
            : {
                kind: "BashCommand",
                id: commandId,
                position: String(row.c_position),
                sandboxId,
                timestamp: dateOf(row.c_timestamp) as Date,
                command: row.c_command ?? "",
                cwd: row.c_cwd,
                timeout: row.c_timeout ?? 300,
                workerId,
                dispatchedAt: at,
                finishedAt: null,
              },
      };
    },

    async getCommand(commandId: string): Promise<BashCommandRow | null> {
      const row = await db
        .selectFrom("bash_events")
        .selectAll()
        .where("id", "=", commandId)
        .where("kind", "=", "BashCommand")
        .executeTakeFirst();
      return row ? (rowOf(row) as BashCommandRow) : null;
    },

    /**
     * The worker that takes the command, and when (by its own clock, as its directory entry's
     * startedAt): the command as it is, or null when there is no such command or it already ended.
     */
    async dispatch(commandId: string, workerId: string, at: Date): Promise<BashCommandRow | null> {
      const row = await db
        .updateTable("bash_events")
        .set({ worker_id: workerId, dispatched_at: at })
        .where("id", "=", commandId)
        .where("kind", "=", "BashCommand")
        .where("finished_at", "is", null)
        .returningAll()
        .executeTakeFirst();
      return row ? (rowOf(row) as BashCommandRow) : null;
    },

    /**
     * Appends an output of a running command. One with an exit code is the last: the command is
     * marked finished with it. Nothing is written (false) once the command is finished, so a late
     * worker cannot add to a command already ended for it.
     */
    async appendOutput(sandboxId: string, o: BashOutputInput): Promise<boolean> {
      // One statement (one round trip): the last output ends the command in the same statement,
      // and a second writer of a last output finds it ended (the row lock orders the two).
      const at = o.timestamp ?? new Date();
      const values = sql`${o.id}::uuid, ${sandboxId}::uuid, 'BashOutput', ${o.commandId}::uuid, ${at}::timestamptz, ${o.order}::int, ${o.exitCode}::int, ${o.stdout}::text, ${o.stderr}::text`;
      const columns = sql`(id, sandbox_id, kind, command_id, "timestamp", "order", exit_code, stdout, stderr)`;
      const result =
        o.exitCode === null
          ? await sql`insert into bash_events ${columns}
              select ${values} where exists (
                select 1 from bash_events where id = ${o.commandId}::uuid and kind = 'BashCommand' and finished_at is null)`.execute(
              db,
            )
          : await sql`with ended as (
                update bash_events set finished_at = ${at}::timestamptz
                where id = ${o.commandId}::uuid and kind = 'BashCommand' and finished_at is null returning id)
              insert into bash_events ${columns} select ${values} from ended`.execute(db);
      return Number(result.numAffectedRows ?? 0) > 0;
    },

    /** The sandbox's commands without a last output yet. */
    async unfinished(sandboxId: string): Promise<BashCommandRow[]> {
      const rows = await db
        .selectFrom("bash_events")
        .selectAll()
        .where("sandbox_id", "=", sandboxId)
        .where("kind", "=", "BashCommand")
        .where("finished_at", "is", null)
        .execute();
      return rows.map((r) => rowOf(r) as BashCommandRow);
    },

    /** The highest order written for a command (-1: none yet). */
    async lastOrder(commandId: string): Promise<number> {
      const { n } = await db
        .selectFrom("bash_events")
        .select(sql<number | null>`max("order")`.as("n"))
        .where("command_id", "=", commandId)
        .executeTakeFirstOrThrow();
      return n === null ? -1 : Number(n);
    },

    /** One page of the sandbox's events and the page id of the next (null: this is the last). */
    async search(q: BashEventQuery): Promise<{ items: BashEventRow[]; nextPageId: string | null }> {
      let query = db.selectFrom("bash_events").selectAll().where("sandbox_id", "=", q.sandboxId);
      if (q.kind) query = query.where("kind", "=", q.kind);
      if (q.commandId) query = query.where("command_id", "=", q.commandId);
      if (q.timestampGte) query = query.where("timestamp", ">=", q.timestampGte);
      if (q.timestampLt) query = query.where("timestamp", "<", q.timestampLt);
      if (q.orderGt !== undefined) {
        const gt = q.orderGt;
        query = query.where((eb) => eb.or([eb("order", "is", null), eb("order", ">", gt)]));
      }
      if (q.pageId) query = query.where("position", q.desc ? "<=" : ">=", q.pageId);
      const rows = await query
        .orderBy("position", q.desc ? "desc" : "asc")
        .limit(q.limit + 1)
        .execute();
      const next = rows.length > q.limit ? rows[q.limit] : undefined;
      return { items: rows.slice(0, q.limit).map(rowOf), nextPageId: next ? String(next.position) : null };
    },

    async get(sandboxId: string, id: string): Promise<BashEventRow | null> {
      const row = await db
        .selectFrom("bash_events")
        .selectAll()
        .where("sandbox_id", "=", sandboxId)
        .where("id", "=", id)
        .executeTakeFirst();
      return row ? rowOf(row) : null;
    },

    /**
     * Keeps the sandbox's stored output within `maxChars` (characters of stdout and stderr) and
     * `maxCommands` commands: its finished commands leave, oldest first, each with its outputs,
     * until what is left fits. A command still running is never removed. Returns how many left.
     */
    async pruneOutput(sandboxId: string, maxChars: number, maxCommands: number): Promise<number> {
      const result = await sql<{ n: string }>`
        with sizes as (
          select o.command_id, sum(coalesce(length(o.stdout), 0) + coalesce(length(o.stderr), 0)) as chars,
            max(o.position) as last
          from bash_events o where o.sandbox_id = ${sandboxId}::uuid and o.kind = 'BashOutput'
          group by o.command_id),
        newest_first as (
          select s.command_id, c.finished_at is not null as finished,
            sum(s.chars) over (order by s.last desc rows unbounded preceding) as kept,
            row_number() over (order by s.last desc) as nth
          from sizes s join bash_events c on c.id = s.command_id),
        doomed as (
          select command_id from newest_first where finished and (kept > ${maxChars} or nth > ${maxCommands})),
        gone as (
          delete from bash_events e where e.sandbox_id = ${sandboxId}::uuid
            and (e.id in (select command_id from doomed) or e.command_id in (select command_id from doomed))
          returning 1)
        select (select count(*) from doomed) as n`.execute(db);
      return Number(result.rows[0]?.n ?? 0);
    },

    /** Removes every bash event of the sandbox; how many there were. */
    async clear(sandboxId: string): Promise<number> {
      const res = await db.deleteFrom("bash_events").where("sandbox_id", "=", sandboxId).executeTakeFirst();
      return Number(res.numDeletedRows);
    },
  };
};
