import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LiveStats, PERCENTILE_S, RATE_S } from './live-stats.js';

const T = 1_700_000_000_000; // a whole second

/** Within the histogram's ±5 %. */
function near(actual: number | null | undefined, expected: number): void {
  assert.ok(actual !== null && actual !== undefined, `expected ~${expected}, got ${actual}`);
  assert.ok(Math.abs(actual / expected - 1) < 0.05, `expected ~${expected}, got ${actual}`);
}

test('per-backend rates over the last complete seconds, fleet seconds with means', () => {
  const s = new LiveStats(60);
  for (let sec = 0; sec < RATE_S; sec++)
    for (let i = 0; i < 3; i++)
      s.record({
        backend: 'a',
        at: T + sec * 1000 + i * 10,
        ok: true,
        latencyMs: 200,
        ttfbMs: 20,
        outputTokens: 50,
      });
  s.record({ backend: 'b', at: T + 9500, ok: true, latencyMs: 1000, outputTokens: 10 });

  const now = T + RATE_S * 1000 + 300;
  const a = s.backend('a', now)!;
  assert.equal(a.requestsPerS, 3);
  assert.equal(a.tokensPerS, 150);
  assert.equal(a.errorsPerS, 0);
  assert.deepEqual(a.recentErrors, []);
  assert.equal(s.backend('unknown', now), undefined);

  assert.deepEqual(s.lastSecond(now), {
    t: T + 9000,
    completed: 4,
    failed: 0,
    tokens: 160,
    uncounted: 0,
    meanLatencyMs: (3 * 200 + 1000) / 4,
    meanTtfbMs: 20, // b reported none: not counted as zero
  });
  const series = s.fleetSeries(now);
  assert.equal(series.length, RATE_S, 'from the first second recorded to the last complete one');
  assert.equal(series[0]!.t, T);
  assert.ok(series.every((x) => x.completed >= 3));
});

test('a new backend is rated over the seconds it has existed, not the full rate window', () => {
  const s = new LiveStats(60);
  for (let i = 0; i < 4; i++) s.record({ backend: 'a', at: T + i * 100, ok: true, latencyMs: 5 });
  for (let i = 0; i < 4; i++) s.record({ backend: 'a', at: T + 1000 + i * 100, ok: true, latencyMs: 5 });
  assert.equal(s.backend('a', T + 2100)!.requestsPerS, 4);
});

test('latency percentiles over the last minute, within the histogram resolution', () => {
  const s = new LiveStats(300);
  // 1..100 ms, one of each, spread over the last 50 seconds
  for (let i = 1; i <= 100; i++) s.record({ backend: 'a', at: T + (i % 50) * 1000, ok: true, latencyMs: i });
  const now = T + 50_000;
  const a = s.backend('a', now)!;
  near(a.p50LatencyMs, 50);
  near(a.p95LatencyMs, 95);
  // a single slow request moves p95 only when it is more than 5 % of the sample
  s.record({ backend: 'a', at: now, ok: true, latencyMs: 60_000 });
  near(s.backend('a', now)!.p95LatencyMs, 95);
  // a minute on, the old samples have left the percentile window
  s.record({ backend: 'a', at: now + PERCENTILE_S * 1000, ok: true, latencyMs: 7 });
  const later = s.backend('a', now + PERCENTILE_S * 1000 + 1)!;
  near(later.p50LatencyMs, 7);
  near(later.p95LatencyMs, 7);
  assert.equal(new LiveStats().backend('a', now), undefined);
});

test('errors: counted per second, the last five kept with their messages, no latency sample', () => {
  const s = new LiveStats(60);
  for (let i = 0; i < 7; i++)
    s.record({ backend: 'b', at: T + i * 100, ok: false, latencyMs: 5, error: `boom ${i}` });
  s.record({ backend: 'b', at: T + 800, ok: false, latencyMs: 5 });
  const b = s.backend('b', T + 1000)!;
  assert.equal(b.errorsPerS, 8);
  assert.equal(b.requestsPerS, 0);
  assert.equal(b.p50LatencyMs, null);
  assert.deepEqual(
    b.recentErrors.map((e) => e.message),
    ['boom 3', 'boom 4', 'boom 5', 'boom 6', 'failed'],
  );
  assert.equal(s.lastSecond(T + 1000).failed, 8);
  assert.equal(s.lastSecond(T + 1000).meanLatencyMs, null);
});

test('the window moves on: old seconds read as zero, idle backends are forgotten', () => {
  const s = new LiveStats(60);
  s.record({ backend: 'a', at: T, ok: true, latencyMs: 100, outputTokens: 5 });
  s.record({ backend: 'a', at: T + 200, ok: false, latencyMs: 1, error: 'x' });
  const later = T + 120_000;
  const a = s.backend('a', later)!;
  assert.equal(a.requestsPerS, 0);
  assert.equal(a.p50LatencyMs, null);
  assert.equal(a.recentErrors.length, 1, 'errors outlive the rate window until the backend is forgotten');
  assert.deepEqual(s.lastSecond(later), {
    t: later - 1000,
    completed: 0,
    failed: 0,
    tokens: 0,
    uncounted: 0,
    meanLatencyMs: null,
    meanTtfbMs: null,
  });
  const series = s.fleetSeries(later);
  assert.equal(series.length, 60, 'never more than the window');
  assert.ok(series.every((x) => x.completed === 0));

  const snap = s.snapshot(later);
  assert.equal(snap.backends.size, 0, 'a backend silent for the whole window is dropped');
  assert.equal(s.backend('a', later), undefined);
});

test('a slot reused for a newer second starts from zero; records older than the window are dropped', () => {
  const s = new LiveStats(60);
  s.record({ backend: 'a', at: T, ok: true, latencyMs: 10, outputTokens: 1 });
  s.record({ backend: 'a', at: T + 60_000, ok: true, latencyMs: 30, outputTokens: 2 }); // same slot, a minute on
  s.record({ backend: 'a', at: T + 500, ok: true, latencyMs: 999, outputTokens: 100 }); // late and too old
  const sec = s.lastSecond(T + 61_000);
  assert.equal(sec.completed, 1);
  assert.equal(sec.tokens, 2);
  assert.equal(sec.meanLatencyMs, 30);
  near(s.backend('a', T + 61_000)!.p95LatencyMs, 30);
});

test('generation without a token count is uncounted, not 0 tokens; embeddings are neither', () => {
  const s = new LiveStats(60);
  for (let sec = 0; sec < RATE_S; sec++) {
    s.record({ backend: 'a', at: T + sec * 1000, ok: true, latencyMs: 10, outputTokens: 20 });
    s.record({ backend: 'a', at: T + sec * 1000 + 1, ok: true, latencyMs: 10 }); // stream without usage
    s.record({ backend: 'a', at: T + sec * 1000 + 2, ok: true, latencyMs: 10, generation: false });
    s.record({ backend: 'a', at: T + sec * 1000 + 3, ok: false, latencyMs: 10, error: 'x' });
  }
  const now = T + RATE_S * 1000;
  const a = s.backend('a', now)!;
  assert.equal(a.requestsPerS, 3);
  assert.equal(a.tokensPerS, 20);
  assert.equal(a.uncountedPerS, 1);
  const last = s.lastSecond(now);
  assert.deepEqual([last.completed, last.tokens, last.uncounted], [3, 20, 1]);
});

test('memory stays bounded however long it runs', () => {
  const s = new LiveStats(60);
  for (let sec = 0; sec < 3600; sec++)
    s.record({ backend: `b${sec % 3}`, at: T + sec * 1000, ok: sec % 10 !== 0, latencyMs: 50, error: 'e' });
  const snap = s.snapshot(T + 3600 * 1000);
  assert.equal(snap.fleet.length, 60);
  assert.equal(snap.backends.size, 3);
  for (const b of snap.backends.values()) assert.ok(b.recentErrors.length <= 5);
  assert.throws(() => new LiveStats(10), RangeError);
});
