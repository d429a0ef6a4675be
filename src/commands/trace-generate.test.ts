import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { prefixHeavyTraceLines } from '../workloads/prefix-heavy.js';
import { traceWorkload } from '../workloads/trace.js';
import { runTraceGenerate } from './trace-generate.js';
import { UsageError } from './usage-error.js';

test('trace generate writes the generator’s lines, which the trace importer reads as Mooncake', () => {
  const out = join(mkdtempSync(join(tmpdir(), 'llmlb-gen-')), 'docs.jsonl');
  const r = runTraceGenerate({ shape: 'documents', rate: 2, durationS: 60, seed: 5, out });
  const text = readFileSync(out, 'utf8');
  assert.equal(
    text,
    prefixHeavyTraceLines({ shape: 'documents', rate: 2, durationS: 60 }, 5).join('\n') + '\n',
  );
  const replay = traceWorkload({ path: out }, 1);
  assert.equal(replay.format.name, 'mooncake');
  assert.equal(replay.start().length, r.requests);
  assert.ok(r.requests > 60 && r.requests < 200, `${r.requests}`);
});

test('trace generate: a missing or unknown shape and a bad rate are usage errors naming the flag', () => {
  assert.throws(
    () => runTraceGenerate({}),
    (e: unknown) => e instanceof UsageError && /--shape/.test(e.message),
  );
  assert.throws(
    () => runTraceGenerate({ shape: 'novels' }),
    (e: unknown) => e instanceof UsageError && /--shape: .*documents/.test(e.message),
  );
  assert.throws(
    () => runTraceGenerate({ shape: 'agents', rate: 1e6, durationS: 1e6 }),
    (e: unknown) => e instanceof UsageError && /--duration: /.test(e.message),
  );
});
