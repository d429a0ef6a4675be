/**
 * Crash and resume with a real process: `llmlb tasks run` is killed with SIGKILL mid-run, a second
 * one picks up, and every task ends with exactly one answer written (a trigger logs each write).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { BACKENDS, TEST_DATABASE_URL, uniqueSchema, type Backend } from './testing.js';
import { migrate, pgSql, pgliteSql, type Sql } from './sql.js';
import { TaskStore } from './store.js';
import { startModelsBackend } from '../sim/backlog/models-backend.js';
import { BACKLOG_MODELS } from '../sim/backlog/scenario.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const N = 60;

const ANSWER_LOG = `
  CREATE TABLE answer_writes (task_id BIGINT NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp());
  CREATE FUNCTION log_answer() RETURNS trigger AS $$
    BEGIN INSERT INTO answer_writes (task_id) VALUES (NEW.id); RETURN NEW; END $$ LANGUAGE plpgsql;
  CREATE TRIGGER tasks_answer_written AFTER UPDATE OF answer ON tasks
    FOR EACH ROW WHEN (NEW.answer IS NOT NULL) EXECUTE FUNCTION log_answer();`;

function solverProcess(args: string[]): {
  child: ChildProcess;
  solved: () => number;
  exited: Promise<number | null>;
} {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'tasks', 'run', ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let solved = 0;
  createInterface({ input: child.stdout! }).on('line', (l) => {
    if (l.includes('"type":"solved"')) solved++;
  });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      if (code !== 0 && code !== null) process.stderr.write(err);
      resolve(code);
    }),
  );
  return { child, solved: () => solved, exited };
}

async function waitFor(cond: () => boolean, what: string, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function open(backend: Backend, where: string): Promise<Sql> {
  const sql = backend === 'pglite' ? await pgliteSql(where) : await pgSql(TEST_DATABASE_URL, where);
  return sql;
}

for (const backend of BACKENDS) {
  test(`${backend}: kill -9 mid-run, restart: no task lost, none answered twice`, async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'llmlb-crash-'));
    const schema = uniqueSchema();
    const where = backend === 'pglite' ? join(dir, 'db') : schema;
    t.after(async () => {
      if (backend === 'postgres') {
        const s = await pgSql(TEST_DATABASE_URL, schema);
        await s.exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        await s.close();
      }
      await rm(dir, { recursive: true, force: true });
    });
    // model-0 answers in 1–3 s; at 10× a call lasts 100–300 ms, so the kill lands mid-call.
    const be = await startModelsBackend({ models: BACKLOG_MODELS, timeScale: 10 });
    t.after(() => be.close());

    let sql = await open(backend, where);
    await migrate(sql);
    await sql.exec(ANSWER_LOG);
    await new TaskStore(sql).add(Array.from({ length: N }, (_, i) => ({ prompt: `crash prompt ${i}` })));
    if (backend === 'pglite') await sql.close(); // PGlite: one process at a time

    const db =
      backend === 'pglite'
        ? ['--data-dir', where]
        : ['--database-url', TEST_DATABASE_URL, '--schema', schema];
    const args = [
      ...db,
      '--router',
      be.url,
      '--no-admission',
      '--model',
      'model-0',
      '--max-workers',
      '6',
      '--visibility-ms',
      '1500',
      '--drain',
      '--progress',
    ];
    const first = solverProcess(args);
    await waitFor(() => first.solved() >= 10, 'the first solver to answer 10 tasks');
    await waitFor(() => be.inFlight() >= 3, 'calls in flight at the kill');
    first.child.kill('SIGKILL');
    assert.equal(await first.exited, null, 'killed, not exited');
    const solvedBefore = first.solved();
    assert.ok(solvedBefore < N, 'killed before the end');

    const second = solverProcess(args);
    assert.equal(await second.exited, 0, 'the second solver drains and exits 0');

    if (backend === 'pglite') sql = await open(backend, where);
    try {
      const store = new TaskStore(sql);
      assert.deepEqual(await store.counts(), { queued: 0, running: 0, done: N, dead: 0 });
      const writes = await sql.query<{ task_id: string; n: string }>(
        'SELECT task_id, count(*) AS n FROM answer_writes GROUP BY task_id',
      );
      assert.equal(writes.length, N, 'every task answered');
      assert.ok(
        writes.every((w) => Number(w.n) === 1),
        'no task answered twice',
      );
      const rows = await store.all();
      // The tasks in flight at the kill were taken over after their claim lapsed: a second attempt.
      const retaken = rows.filter((r) => r.attempts === 2);
      assert.ok(retaken.length >= 1, 'some tasks were recovered from the dead worker');
      assert.ok(rows.every((r) => r.attempts <= 2));
      // The trigger above is the truth; progress lines can only under-count (a SIGKILL may land
      // between an answer's write and its line reaching our pipe), never report a task twice.
      assert.ok(solvedBefore + second.solved() <= N, 'no task reported solved twice across both runs');
      assert.ok(solvedBefore + second.solved() >= N - 6, 'at most the killed workers’ lines are missing');
    } finally {
      await sql.close();
    }
  });
}
