import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startScenarioPool, startTracePool } from './pool.js';

describe('trace pool', () => {
  it('started and closed without jobs (a failed check pass) leaves nothing running', async () => {
    const pool = startTracePool(2);
    await pool.close();
    await assert.rejects(pool.run([]), /closed/);
  });

  it('no jobs: an empty result, in a thread or on workers', async () => {
    for (const threads of [1, 2]) {
      const pool = startTracePool(threads);
      try {
        assert.deepEqual(await pool.run([]), []);
      } finally {
        await pool.close();
      }
    }
  });

  it('a scenario job that fails rejects the run with its error, in a thread or on workers', async () => {
    for (const threads of [1, 2]) {
      const pool = startScenarioPool(threads);
      try {
        await assert.rejects(
          pool.run([
            { scenarioPath: 'scenarios/does-not-exist.yaml', policy: { name: 'round-robin' }, seed: 1 },
          ]),
          /does-not-exist/,
        );
      } finally {
        await pool.close();
      }
    }
  });
});
