import { readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { HttpAdmission, OpenAdmission, type Admission } from '../tasks/admission.js';
import { OpenAiCaller } from '../tasks/caller.js';
import { Solver, type SolverEvent } from '../tasks/solver.js';
import { migrate, pgSql, pgliteSql, type Sql } from '../tasks/sql.js';
import { TaskStore, type NewTask } from '../tasks/store.js';
import { UsageError } from './usage-error.js';

export interface DbOptions {
  databaseUrl?: string;
  dataDir: string;
  schema: string;
}

/** `--database-url` → a real server; otherwise embedded PGlite in `--data-dir`. Migrated on open. */
export async function openDb(o: DbOptions): Promise<Sql> {
  const sql = o.databaseUrl ? await pgSql(o.databaseUrl, o.schema) : await pgliteSql(o.dataDir, o.schema);
  try {
    await migrate(sql);
  } catch (err) {
    await sql.close();
    throw err;
  }
  return sql;
}

export async function tasksMigrate(o: DbOptions): Promise<void> {
  const sql = o.databaseUrl ? await pgSql(o.databaseUrl, o.schema) : await pgliteSql(o.dataDir, o.schema);
  try {
    const applied = await migrate(sql);
    process.stdout.write(applied.length ? `applied ${applied.join(', ')}\n` : 'up to date\n');
  } finally {
    await sql.close();
  }
}

/** Parses `--file`: JSON lines `{"prompt": "…", "model": "…"}` or plain lines (one prompt each). */
export function parseTaskLines(text: string, model?: string): NewTask[] {
  const out: NewTask[] = [];
  text.split('\n').forEach((line, i) => {
    const s = line.trim();
    if (!s) return;
    if (s.startsWith('{')) {
      let v: unknown;
      try {
        v = JSON.parse(s);
      } catch (err) {
        throw new UsageError(`line ${i + 1}: invalid JSON: ${(err as Error).message}`);
      }
      const o = v as { prompt?: unknown; model?: unknown };
      if (typeof o.prompt !== 'string' || o.prompt === '')
        throw new UsageError(`line ${i + 1}: "prompt" must be a non-empty string`);
      if (o.model !== undefined && o.model !== null && typeof o.model !== 'string') {
        throw new UsageError(`line ${i + 1}: "model" must be a string`);
      }
      out.push({ prompt: o.prompt, model: (o.model as string | undefined) ?? model ?? null });
    } else out.push({ prompt: s, model: model ?? null });
  });
  return out;
}

export async function tasksAdd(
  o: DbOptions & { prompt?: string[]; file?: string; model?: string },
): Promise<void> {
  const tasks: NewTask[] = (o.prompt ?? []).map((p) => ({ prompt: p, model: o.model ?? null }));
  if (o.file) tasks.push(...parseTaskLines(await readFile(o.file, 'utf8'), o.model));
  if (tasks.length === 0) throw new UsageError('nothing to add: give --prompt TEXT or --file FILE');
  const sql = await openDb(o);
  try {
    const ids = await new TaskStore(sql).add(tasks);
    process.stdout.write(`added ${ids.length} task(s), ids ${ids[0]}…${ids[ids.length - 1]}\n`);
  } finally {
    await sql.close();
  }
}

export async function tasksStatus(o: DbOptions): Promise<void> {
  const sql = await openDb(o);
  try {
    process.stdout.write(JSON.stringify(await new TaskStore(sql).counts()) + '\n');
  } finally {
    await sql.close();
  }
}

export interface RunOptions extends DbOptions {
  router: string;
  admission?: string;
  /** Model calls go here (default: the router). */
  modelsUrl?: string;
  noAdmission?: boolean;
  model?: string;
  adminToken?: string;
  maxWorkers: number;
  visibilityMs: number;
  maxAttempts: number;
  backoffMs: number;
  estimatedOutputTokens: number;
  maxTokens?: number;
  drain: boolean;
  progress: boolean;
}

export async function tasksRun(o: RunOptions): Promise<void> {
  if (o.noAdmission && !o.model)
    throw new UsageError('--no-admission needs --model (the model for unpinned tasks)');
  const sql = await openDb(o);
  const store = new TaskStore(sql, {
    visibilityMs: o.visibilityMs,
    maxAttempts: o.maxAttempts,
    baseBackoffMs: o.backoffMs,
  });
  const admission: Admission = o.noAdmission
    ? new OpenAdmission(o.model!, o.maxWorkers)
    : new HttpAdmission(o.admission ?? o.router, o.adminToken);
  const caller = new OpenAiCaller(o.modelsUrl ?? o.router, o.maxTokens);
  const ac = new AbortController();
  const onSignal = (): void => ac.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const onEvent = o.progress
    ? (e: SolverEvent): void => void process.stdout.write(JSON.stringify(e) + '\n')
    : undefined;
  const solver = new Solver({
    store,
    admission,
    caller,
    workerId: `${hostname()}:${process.pid}`,
    maxWorkers: o.maxWorkers,
    estimatedOutputTokens: o.estimatedOutputTokens,
    drain: o.drain,
    signal: ac.signal,
    ...(onEvent ? { onEvent } : {}),
  });
  try {
    const stats = await solver.run();
    process.stdout.write(
      JSON.stringify({ event: 'finished', ...stats, counts: await store.counts() }) + '\n',
    );
    if (stats.stoppedBy !== undefined)
      throw new UsageError(
        `the router at ${o.admission ?? o.router} admits no task: ${stats.stoppedBy}. Give the router ` +
          'model quotas (a quotas: section in its config file), pin tasks to a model with ' +
          'quota (tasks add --model), or skip admission: tasks run --no-admission --model NAME',
      );
    if (stats.solved === 0 && stats.failed > 0) {
      process.stderr.write(
        `llmlb: no task was solved and ${stats.failed} attempt(s) failed; ` +
          '`llmlb tasks status` counts them, the --progress lines say why\n',
      );
      process.exitCode = 1;
    }
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await caller.close();
    await sql.close();
  }
}
