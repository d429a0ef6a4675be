// Unequal fleets (prefix-unequal-8): a replica that is truly slower is not re-tried every few
// decisions it sits idle (exploreBackoff).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { estimatedWait } from './index.js';
import type { Policy, RequestInfo } from '../../../types.js';
import type { EstimatedWaitParams } from './params.js';
import { backendView, chosen } from '../../../testing.js';

const req = (id: string): RequestInfo => ({
  id,
  model: 'm',
  api: 'ollama',
  arrivedAt: 0,
  promptText: `${id}:`.padEnd(400, 'x').slice(0, 400),
});

/** One answered request on `name`, as an engine reports it: 100 prompt and 100 output tokens. */
function answer(
  p: Policy,
  name: string,
  index: number,
  id: string | RequestInfo,
  prefillMs: number,
  decodeMs: number,
  now: number,
): void {
  const r = typeof id === 'string' ? req(id) : id;
  p.onDispatch?.(r, backendView(name, index), now);
  const end = now + prefillMs + decodeMs;
  p.onComplete?.(
    r,
    backendView(name, index),
    {
      ok: true,
      dispatchedAt: now,
      finishedAt: end,
      promptTokens: 100,
      completionTokens: 100,
      promptEvalMs: prefillMs,
      evalMs: decodeMs,
    },
    end,
  );
}

/**
 * Of `decisions` picks between a fast and a 3× slower idle backend, how many went to the slow one;
 * from decision `fastFrom` on the slow one answers as fast as the other (`late`: its picks after).
 */
function slowPicks(
  params: Partial<EstimatedWaitParams>,
  decisions: number,
  fastFrom = Infinity,
): { slow: number; late: number } {
  const p = estimatedWait({ random: () => 0, params: { exploreAfterDecisions: 2, ...params } });
  answer(p, 'a', 0, 'ta', 10, 1000, 0);
  answer(p, 'b', 1, 'tb', 30, 3000, 0);
  let slow = 0;
  let late = 0;
  for (let i = 0; i < decisions; i++) {
    const now = 10_000 + i * 10_000;
    const r = req(`r${i}`);
    const to = chosen(p.pick(r, [backendView('a', 0), backendView('b', 1)], now))!;
    if (to.name === 'b') {
      slow++;
      if (i >= fastFrom) late++;
      const k = i >= fastFrom ? 1 : 3;
      answer(p, 'b', 1, r, 10 * k, 1000 * k, now);
    } else answer(p, 'a', 0, r, 10, 1000, now);
  }
  return { slow, late };
}

test('a slower idle replica is re-tried ever less often (exploreBackoff)', () => {
  // Every third decision without the backoff (stale after 2, priced at the fleet's best).
  const flat = slowPicks({ exploreBackoff: 0 }, 120).slow;
  assert.ok(flat >= 35, `without backoff: ${flat}`);
  // With it: after 2, 4, 8, 16, 32 more decisions — a handful in 120.
  const backedOff = slowPicks({}, 120).slow;
  assert.ok(backedOff <= 6 && backedOff >= 2, `with backoff: ${backedOff}`);
});

test('a replica that gets as fast as the best is tried again soon, not after the backoff it earned', () => {
  // Slow for 120 decisions (backed off to a try every 64–128), then as fast as the other: its first
  // fast answer resets the backoff, so it is tried every few idle decisions again (as its fits, which
  // forget its slow past at alpha per sample, catch up).
  const { late } = slowPicks({}, 240, 120);
  assert.ok(late >= 20, `picks once fast: ${late}`);
  // Still backed off while it stays slow.
  assert.ok(slowPicks({}, 240).slow <= 8);
});
