import { mkdir, readdir, readFile } from 'node:fs/promises';
import type { PGlite } from '@electric-sql/pglite';
import type { Pool, PoolClient } from 'pg';

/** The little of PostgreSQL the task store needs, over `pg` (a real server) or PGlite (embedded). */
export interface Sql {
  query<T extends object>(text: string, params?: readonly unknown[]): Promise<T[]>;
  /** Several statements, no parameters (migrations). */
  exec(text: string): Promise<void>;
  /** Runs `fn` in one transaction on one connection. */
  transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

const SCHEMA = /^[a-z_][a-z0-9_]{0,62}$/;

function checkSchema(schema: string): string {
  // Interpolated into SQL (search_path takes no parameters), so only plain identifiers pass.
  if (!SCHEMA.test(schema)) throw new Error(`invalid schema name ${JSON.stringify(schema)}`);
  return schema;
}

/** A real PostgreSQL server through a `pg` pool; every connection uses `schema` (created if absent). */
export async function pgSql(url: string, schema = 'public', max = 10): Promise<Sql> {
  const { default: pg } = await import('pg');
  checkSchema(schema);
  const pool: Pool = new pg.Pool({ connectionString: url, max, options: `-c search_path=${schema}` });
  // An idle client's error (server restart) must not crash the process; the next query reports it.
  pool.on('error', () => {});
  await pool.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
  const onClient = (c: Pool | PoolClient): Sql => ({
    async query<T extends object>(text: string, params?: readonly unknown[]) {
      return (await c.query(text, params as unknown[] | undefined)).rows as T[];
    },
    async exec(text: string) {
      await c.query(text);
    },
    transaction: () => Promise.reject(new Error('nested transactions are not supported')),
    close: () => Promise.resolve(),
  });
  return {
    ...onClient(pool),
    async transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T> {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const out = await fn(onClient(client));
        await client.query('COMMIT');
        return out;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      } finally {
        client.release();
      }
    },
    close: () => pool.end(),
  };
}

/** Embedded PostgreSQL (PGlite): `dataDir` on disk, or in memory when undefined. One process at a time. */
export async function pgliteSql(dataDir?: string, schema = 'public'): Promise<Sql> {
  const { PGlite } = await import('@electric-sql/pglite');
  checkSchema(schema);
  // A fresh directory (the default .llmlb/tasks-db) does not exist yet.
  if (dataDir !== undefined && !dataDir.includes('://')) await mkdir(dataDir, { recursive: true });
  const db: PGlite = await PGlite.create(dataDir);
  await db.exec(`CREATE SCHEMA IF NOT EXISTS ${schema}; SET search_path TO ${schema};`);
  type Tx = Parameters<Parameters<PGlite['transaction']>[0]>[0];
  const onTx = (c: PGlite | Tx): Sql => ({
    async query<T extends object>(text: string, params?: readonly unknown[]) {
      return (await c.query<T>(text, params as unknown[] | undefined)).rows;
    },
    async exec(text: string) {
      await c.exec(text);
    },
    transaction: () => Promise.reject(new Error('nested transactions are not supported')),
    close: () => Promise.resolve(),
  });
  return {
    ...onTx(db),
    transaction: <T>(fn: (tx: Sql) => Promise<T>): Promise<T> => db.transaction((tx) => fn(onTx(tx))),
    close: () => db.close(),
  };
}

const MIGRATIONS_DIR = new URL('./migrations/', import.meta.url);

/** Applies the shipped `migrations/*.sql` not yet recorded in `llmlb_migrations`, in name order. */
export async function migrate(sql: Sql): Promise<string[]> {
  const files = (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.sql')).sort();
  return sql.transaction(async (tx) => {
    // Two solvers starting together: the second waits here, then finds everything applied.
    await tx.query('SELECT pg_advisory_xact_lock(7001001)');
    await tx.exec(
      'CREATE TABLE IF NOT EXISTS llmlb_migrations (name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())',
    );
    const done = new Set(
      (await tx.query<{ name: string }>('SELECT name FROM llmlb_migrations')).map((r) => r.name),
    );
    const applied: string[] = [];
    for (const f of files) {
      if (done.has(f)) continue;
      await tx.exec(await readFile(new URL(f, MIGRATIONS_DIR), 'utf8'));
      await tx.query('INSERT INTO llmlb_migrations (name) VALUES ($1)', [f]);
      applied.push(f);
    }
    return applied;
  });
}
