import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLogger, LOG_FLUSH_MS } from './log.js';

const lines = (file: string): string[] =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '');

test('the logger batches lines instead of writing each one, and a light trickle still lands within the flush interval', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-log-'));
  const file = join(dir, 'out.log');
  try {
    const log = createLogger('info', 'llmlb', file);
    await sleep(20); // the file is opened asynchronously
    log.info({ rid: 'a', status: 200 }, 'request');
    log.info({ rid: 'b', status: 200 }, 'request');
    log.debug({ rid: 'c' }, 'below the level');
    await new Promise((r) => setImmediate(r));
    assert.equal(lines(file).length, 0, 'two short lines are held for the batch');
    await sleep(LOG_FLUSH_MS * 3);
    const got = lines(file).map((l) => JSON.parse(l) as { rid: string; msg: string; name: string });
    assert.deepEqual(
      got.map((l) => [l.rid, l.msg, l.name]),
      [
        ['a', 'request', 'llmlb'],
        ['b', 'request', 'llmlb'],
      ],
    );

    // A burst over the batch size is written without waiting for the timer, in order, none lost.
    for (let i = 0; i < 200; i++)
      log.info({ rid: `r${i}`, path: '/api/generate', pad: 'x'.repeat(100) }, 'request');
    await sleep(10);
    const early = lines(file).length;
    assert.ok(early > 2, `a full batch is written at once (saw ${early - 2} of 200)`);
    await sleep(LOG_FLUSH_MS * 3);
    const all = lines(file).map((l) => (JSON.parse(l) as { rid: string }).rid);
    assert.equal(all.length, 202);
    assert.deepEqual(
      all.slice(2),
      Array.from({ length: 200 }, (_, i) => `r${i}`),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
