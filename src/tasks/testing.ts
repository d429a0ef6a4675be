import { randomBytes } from 'node:crypto';
import type { TestContext } from 'node:test';
import { migrate, pgSql, pgliteSql, type Sql } from './sql.js';

/** The real server the tests use; absent → the tests fail (never skip). */
export const TEST_DATABASE_URL =
  process.env.LLMLB_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

export type Backend = 'pglite' | 'postgres';
export const BACKENDS: readonly Backend[] = ['pglite', 'postgres'];

export const uniqueSchema = (): string => `llmlb_t_${process.pid}_${randomBytes(4).toString('hex')}`;

/** A migrated, empty database for one test: a fresh in-memory PGlite, or a unique schema dropped after. */
export async function testSql(t: TestContext, backend: Backend, schema = uniqueSchema()): Promise<Sql> {
  let sql: Sql;
  if (backend === 'pglite') {
    sql = await pgliteSql(undefined, schema);
    t.after(() => sql.close());
  } else {
    try {
      sql = await pgSql(TEST_DATABASE_URL, schema, 20);
    } catch (err) {
      throw new Error(
        `PostgreSQL at ${TEST_DATABASE_URL} is required for this test: ${(err as Error).message}`,
      );
    }
    t.after(async () => {
      await sql.exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await sql.close();
    });
  }
  await migrate(sql);
  return sql;
}
