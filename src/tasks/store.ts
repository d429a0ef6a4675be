import { randomUUID } from 'node:crypto';
import { backoffMs } from '../core/backoff.js';
import type { Sql } from './sql.js';

export type TaskStatus = 'queued' | 'running' | 'done' | 'dead';

export interface Task {
  readonly id: number;
  readonly prompt: string;
  readonly model: string | null;
  readonly status: TaskStatus;
  readonly answer: string | null;
  readonly attempts: number;
  readonly claimedBy: string | null;
  readonly lastError: string | null;
}

/** A task held by one worker: `token` proves the claim is still its own when it finishes. */
export interface Claim {
  readonly task: Task;
  readonly token: string;
}

export interface NewTask {
  readonly prompt: string;
  readonly model?: string | null;
}

export interface StoreOptions {
  /** How long a claim lasts without `extend` before another worker may take the task. */
  readonly visibilityMs?: number;
  /** Attempts (claims) before a failing task is dead-lettered. */
  readonly maxAttempts?: number;
  /** Retry delay: `baseBackoffMs · 2^(attempt−1)`, capped, times a jitter in [0.5, 1). */
  readonly baseBackoffMs?: number;
  readonly maxBackoffMs?: number;
  /** Time source (ms since epoch); tests pass a manual clock. */
  readonly now?: () => number;
  /** Uniform [0, 1) for the backoff jitter. */
  readonly random?: () => number;
}

export type StatusCounts = Record<TaskStatus, number>;

interface Row {
  id: string | number;
  prompt: string;
  model: string | null;
  status: TaskStatus;
  answer: string | null;
  attempts: number;
  claimed_by: string | null;
  last_error: string | null;
  claim_token?: string | null;
}

const toTask = (r: Row): Task => ({
  id: Number(r.id),
  prompt: r.prompt,
  model: r.model,
  status: r.status,
  answer: r.answer,
  attempts: r.attempts,
  claimedBy: r.claimed_by,
  lastError: r.last_error,
});

const COLS = 'id, prompt, model, status, answer, attempts, claimed_by, last_error';

/**
 * The `tasks` table as a work queue. Claims are one `UPDATE … WHERE id IN (SELECT … FOR UPDATE
 * SKIP LOCKED)`: concurrent claimers never take the same row and never block on each other. A
 * claim is a lease (`visible_after`): a crashed worker's tasks become claimable again once it
 * lapses, and the late worker's answer is then refused because its token no longer matches.
 */
export class TaskStore {
  readonly visibilityMs: number;
  readonly maxAttempts: number;
  private readonly baseBackoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly now: () => number;
  private readonly random: () => number;
  private lastSweep = -Infinity;

  constructor(
    readonly sql: Sql,
    o: StoreOptions = {},
  ) {
    this.visibilityMs = o.visibilityMs ?? 60_000;
    this.maxAttempts = o.maxAttempts ?? 5;
    this.baseBackoffMs = o.baseBackoffMs ?? 1_000;
    this.maxBackoffMs = o.maxBackoffMs ?? 60_000;
    this.now = o.now ?? Date.now;
    this.random = o.random ?? Math.random;
    for (const [k, v] of Object.entries({
      visibilityMs: this.visibilityMs,
      maxAttempts: this.maxAttempts,
      baseBackoffMs: this.baseBackoffMs,
      maxBackoffMs: this.maxBackoffMs,
    })) {
      if (!Number.isFinite(v) || v <= 0) throw new Error(`${k} must be a positive number, got ${v}`);
    }
  }

  private at(offsetMs = 0): Date {
    return new Date(this.now() + offsetMs);
  }

  /** Inserts tasks (one statement) and returns their ids. Safe while workers run. */
  async add(tasks: readonly NewTask[]): Promise<number[]> {
    if (tasks.length === 0) return [];
    for (const t of tasks) {
      if (typeof t.prompt !== 'string' || t.prompt.length === 0)
        throw new Error('a task needs a non-empty prompt');
    }
    const now = this.at();
    const rows = await this.sql.query<{ id: string | number }>(
      `INSERT INTO tasks (prompt, model, visible_after, created_at, updated_at)
       SELECT p, m, $3, $3, $3 FROM unnest($1::text[], $2::text[]) AS u(p, m) RETURNING id`,
      [tasks.map((t) => t.prompt), tasks.map((t) => t.model ?? null), now],
    );
    return rows.map((r) => Number(r.id));
  }

  /**
   * Claims up to `limit` visible tasks for `worker`: queued ones past their backoff, and running
   * ones whose claim lapsed (their worker died). Each claim counts as an attempt; a lapsed task
   * that has used all its attempts is dead-lettered instead of claimed again.
   */
  async claim(worker: string, limit = 1): Promise<Claim[]> {
    const now = this.at();
    // The dead-letter sweep only matters once claims lapse: run it at most a few times per visibility period.
    if (now.getTime() - this.lastSweep >= Math.min(1_000, this.visibilityMs / 4)) {
      this.lastSweep = now.getTime();
      await this.sweepLapsed(now);
    }
    const token = randomUUID();
    const rows = await this.sql.query<Row>(
      `UPDATE tasks SET status = 'running', attempts = attempts + 1, claimed_by = $2, claim_token = $3,
         visible_after = $4, updated_at = $1
       WHERE id IN (SELECT id FROM tasks
                    WHERE status IN ('queued', 'running') AND visible_after <= $1 AND attempts < $6
                    ORDER BY visible_after, id LIMIT $5 FOR UPDATE SKIP LOCKED)
       RETURNING ${COLS}`,
      [now, worker, token, this.at(this.visibilityMs), limit, this.maxAttempts],
    );
    return rows.map((r) => ({ task: toTask(r), token }));
  }

  /** Dead-letters lapsed claims that have used every attempt (their worker died on the last one). */
  private async sweepLapsed(now: Date): Promise<void> {
    await this.sql.query(
      `UPDATE tasks SET status = 'dead', claim_token = NULL, updated_at = $1, finished_at = $1,
         last_error = coalesce(last_error || '; ', '') || 'claim expired on the last attempt'
       WHERE id IN (SELECT id FROM tasks WHERE status = 'running' AND visible_after <= $1 AND attempts >= $2
                    FOR UPDATE SKIP LOCKED)`,
      [now, this.maxAttempts],
    );
  }

  /** Pushes the claim's expiry forward; false when the claim was lost (lapsed and taken). */
  async extend(c: Claim, ms = this.visibilityMs): Promise<boolean> {
    const rows = await this.sql.query(
      `UPDATE tasks SET visible_after = $3, updated_at = $4
       WHERE id = $1 AND claim_token = $2 AND status = 'running' RETURNING id`,
      [c.task.id, c.token, this.at(ms), this.at()],
    );
    return rows.length === 1;
  }

  /** Writes the answer. False (and nothing written) when the claim is no longer this worker's. */
  async complete(c: Claim, answer: string): Promise<boolean> {
    const now = this.at();
    const rows = await this.sql.query(
      `UPDATE tasks SET status = 'done', answer = $3, claim_token = NULL, finished_at = $4, updated_at = $4
       WHERE id = $1 AND claim_token = $2 AND status = 'running' RETURNING id`,
      [c.task.id, c.token, answer, now],
    );
    return rows.length === 1;
  }

  /**
   * Records a failed attempt: back to `queued` after an exponential, jittered backoff, or `dead`
   * once `maxAttempts` are used. Returns the new status, or null when the claim was lost.
   */
  async fail(c: Claim, error: string): Promise<{ status: TaskStatus; retryInMs: number } | null> {
    const attempts = c.task.attempts;
    const dead = attempts >= this.maxAttempts;
    const delay = dead ? 0 : backoffMs(attempts, this.baseBackoffMs, this.maxBackoffMs, this.random());
    const now = this.at();
    const rows = await this.sql.query(
      `UPDATE tasks SET status = $3, claim_token = NULL, last_error = $4, visible_after = $5, updated_at = $6,
         finished_at = CASE WHEN $3 = 'dead' THEN $6::timestamptz ELSE NULL END
       WHERE id = $1 AND claim_token = $2 AND status = 'running' RETURNING id`,
      [c.task.id, c.token, dead ? 'dead' : 'queued', error.slice(0, 2000), this.at(delay), now],
    );
    return rows.length === 1 ? { status: dead ? 'dead' : 'queued', retryInMs: delay } : null;
  }

  /** Gives a claim back untouched (shutdown, or admission refused for now): no attempt is spent. */
  async release(c: Claim): Promise<boolean> {
    const rows = await this.sql.query(
      `UPDATE tasks SET status = 'queued', claim_token = NULL, attempts = greatest(attempts - 1, 0),
         visible_after = $3, updated_at = $3
       WHERE id = $1 AND claim_token = $2 AND status = 'running' RETURNING id`,
      [c.task.id, c.token, this.at()],
    );
    return rows.length === 1;
  }

  async counts(): Promise<StatusCounts> {
    const out: StatusCounts = { queued: 0, running: 0, done: 0, dead: 0 };
    const rows = await this.sql.query<{ status: TaskStatus; n: string | number }>(
      'SELECT status, count(*) AS n FROM tasks GROUP BY status',
    );
    for (const r of rows) out[r.status] = Number(r.n);
    return out;
  }

  /** Milliseconds until the next queued or lapsing task becomes claimable; null when none is pending. */
  async nextVisibleInMs(): Promise<number | null> {
    const rows = await this.sql.query<{ t: Date | null }>(
      `SELECT min(visible_after) AS t FROM tasks WHERE status IN ('queued', 'running')`,
    );
    const t = rows[0]?.t;
    return t ? Math.max(0, new Date(t).getTime() - this.now()) : null;
  }

  async get(id: number): Promise<Task | undefined> {
    const rows = await this.sql.query<Row>(`SELECT ${COLS} FROM tasks WHERE id = $1`, [id]);
    return rows[0] ? toTask(rows[0]) : undefined;
  }

  async all(): Promise<Task[]> {
    return (await this.sql.query<Row>(`SELECT ${COLS} FROM tasks ORDER BY id`)).map(toTask);
  }
}
