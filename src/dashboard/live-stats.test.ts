import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LiveStats } from './live-stats.js';

test('per-second rates per backend and for the fleet; errors kept, bounded', () => {
  const s = new LiveStats(60);
  const t = 1_000_000;
  for (let i = 0; i < 10; i++)
    s.record({ backend: 'a', at: t + i * 100, ok: true, latencyMs: 200, outputTokens: 50 });
  s.record({ backend: 'b', at: t + 50, ok: true, latencyMs: 1000, outputTokens: 10 });
  for (let i = 0; i < 7; i++) s.record({ backend: 'b', at: t, ok: false, latencyMs: 5, error: `boom ${i}` });
  const a = s.backend('a', t + 1500, 10);
  assert.equal(a.requestsPerS, 1);
  assert.equal(a.tokensPerS, 50);
  assert.equal(a.meanLatencyMs, 200);
  const b = s.backend('b', t + 1500, 10);
  assert.equal(b.recentErrors.length, 5);
  assert.equal(b.recentErrors[4]?.message, 'boom 6');
  assert.deepEqual(s.fleet(t + 1500), {
    completedPerS: 11,
    tokensPerS: 510,
    meanLatencyMs: (200 * 10 + 1000) / 11,
  });
  // a minute later the window has moved on
  assert.equal(s.backend('a', t + 120_000, 10).requestsPerS, 0);
  assert.deepEqual(s.fleet(t + 120_000), { completedPerS: 0, tokensPerS: 0, meanLatencyMs: null });
});
