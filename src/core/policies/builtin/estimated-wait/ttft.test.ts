// TTFT in the default's cost (issue #30, prefix-agents-8 ×1): a re-sent prompt is not moved off the
// engine that holds it for a little decode time saved in a smaller batch.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { estimatedWait } from './policy.js';
import type { RequestInfo } from '../../../types.js';
import { backendView, chosen, distinctText, engineReport, requestInfo, warmRates } from '../../../testing.js';

const req = (id: string, promptText: string): RequestInfo => requestInfo(id, promptText, { api: 'openai' });

/**
 * b holds a document of `docChars` characters (~docChars / 4 tokens, 1 ms each) and decodes ten
 * other answers (learned: a batch of 4 takes 20 ms a token against 10 alone); a is idle. Returns where a re-read
 * of the document goes.
 */
function reRead(params: Record<string, unknown>, docChars: number): string | undefined {
  const p = estimatedWait({ random: () => 0, params });
  const a = backendView('a', 0, { api: 'openai' });
  const b = backendView('b', 1, { api: 'openai' });
  let t = warmRates(p, [a, b]);
  // Batches of 4 on both: decode slows ~3.3 ms a token per sequence.
  for (const v of [a, b]) {
    const rs = [0, 1, 2, 3].map((i) =>
      req(`batch-${v.name}-${i}`, distinctText(`batch-${v.name}-${i}`, 400)),
    );
    for (const r of rs) p.onDispatch?.(r, v, t);
    for (const r of rs) {
      const rep = { ...engineReport(t, 100, 100, 200), evalMs: 4000, finishedAt: t + 4100 };
      p.onComplete?.(r, v, rep, t + 4100);
    }
    t += 10_000;
  }
  const doc = distinctText('document', docChars);
  const first = req('first', `${doc} first question?`);
  p.onDispatch?.(first, b, t);
  const rep = engineReport(t, docChars / 4, docChars / 4, 200);
  p.onComplete?.(first, b, rep, rep.finishedAt);
  t += 10_000;
  for (let i = 0; i < 10; i++) p.onDispatch?.(req(`busy${i}`, distinctText(`busy-${i}`, 400)), b, t);
  const bBusy = backendView('b', 1, { api: 'openai', inFlight: 10 });
  return chosen(p.pick(req('again', `${doc} another question?`), [a, bBusy], t + 500))?.name;
}

test('ttftWeight keeps a re-read on its holder where a smaller batch elsewhere saved only decode time', () => {
  // ~300 tokens cached on b, which decodes 10 others: a, idle, finishes sooner by its batch alone.
  assert.equal(reRead({ ttftWeight: 0 }, 1200), 'a');
  // Its first token comes ~0.3 s sooner on b, worth more than the decode saved.
  assert.equal(reRead({}, 1200), 'b');
});
