import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HEAVY_SPECS, heimdallParamsSchema, heimdallWorkload } from './heimdall.js';

// The command line Heimdall runs.
const SEED_002 = {
  heavySeeds: 400,
  seedInterval: 0,
  total: 800,
  burstStart: 5,
  burstInterval: 0.5,
  jitter: 0.5,
  inlineExtraGap: 0.5,
  inlineEvery: 24,
  timeout: 10000,
};

describe('heimdall (Heimdall workload.py)', () => {
  const rs = heimdallWorkload(SEED_002, 1).start();
  const byLabel = (l: string) => rs.filter((s) => s.request.label === l);

  it('builds the script’s mix: 400 seeds, 16 inline heavies, 192 short, 192 medium', () => {
    assert.equal(rs.length, 800);
    assert.equal(byLabel('HEAVY').length, 400);
    assert.equal(byLabel('HEAVY_INLINE').length, 16); // 400 // (24 + 1)
    assert.equal(byLabel('SHORT').length, 192);
    assert.equal(byLabel('MED').length, 192);
    assert.equal(rs[0]!.request.id, 'S001_HEAVY');
    assert.equal(rs[399]!.request.id, 'S400_HEAVY');
    assert.ok(byLabel('SHORT').every((s) => /^B\d{4}_SHORT$/.test(s.request.id)));
    assert.ok(byLabel('MED').every((s) => /^M\d{4}_MED$/.test(s.request.id)));
    assert.deepEqual(
      byLabel('HEAVY_INLINE').map((s) => s.request.id),
      Array.from({ length: 16 }, (_, i) => `I${String(i + 1).padStart(3, '0')}_HEAVY`),
    );
  });

  it('cycles HEAVY_SPECS for seeds and inline heavies; burst lengths in the script’s ranges', () => {
    byLabel('HEAVY').forEach((s, i) => assert.equal(s.request.outputTokens, HEAVY_SPECS[i % 4]![1]));
    byLabel('HEAVY_INLINE').forEach((s, i) => assert.equal(s.request.maxTokens, HEAVY_SPECS[i % 4]![1]));
    for (const s of byLabel('SHORT')) assert.ok(s.request.outputTokens >= 25 && s.request.outputTokens <= 40);
    for (const s of byLabel('MED')) assert.ok(s.request.outputTokens >= 60 && s.request.outputTokens <= 90);
    // make_prompt: "[ID] " + isl vocabulary words + " " + min(5·isl, 2000) noise chars.
    const islOf = (prompt: string, id: string, lo: number, hi: number): number | undefined => {
      for (let isl = lo; isl <= hi; isl++) {
        const body = prompt.slice(id.length + 3, prompt.length - Math.min(5 * isl, 2000) - 1);
        const words = body.split(' ');
        if (words.length === isl && words.every((w) => /^[a-z]{4,}$/.test(w))) return isl;
      }
      return undefined;
    };
    byLabel('HEAVY')
      .slice(0, 8)
      .forEach((s, i) => {
        const isl = HEAVY_SPECS[i % 4]![0];
        assert.ok(s.request.prompt!.startsWith(`[${s.request.id}] `));
        assert.equal(islOf(s.request.prompt!, s.request.id, isl, isl), isl);
      });
    for (const s of byLabel('SHORT')) assert.ok(islOf(s.request.prompt!, s.request.id, 10, 20) !== undefined);
    for (const s of byLabel('MED').slice(0, 20))
      assert.ok(islOf(s.request.prompt!, s.request.id, 120, 180) !== undefined);
  });

  it('inline heavies are spread evenly: one after every 24 burst items', () => {
    const burst = rs.slice(400);
    const positions = burst.flatMap((s, i) => (s.request.label === 'HEAVY_INLINE' ? [i] : []));
    assert.deepEqual(
      positions,
      Array.from({ length: 16 }, (_, k) => (k + 1) * 24 + k),
    );
  });

  it('schedule: seeds at 0, burst from 5 s, 0.5 ± 0.5 s apart, +0.5 s after inline heavies', () => {
    assert.ok(rs.slice(0, 400).every((s) => s.at === 0));
    assert.equal(rs[400]!.at, 5);
    const burst = rs.slice(400);
    for (let i = 1; i < burst.length; i++) {
      const gap = burst[i]!.at - burst[i - 1]!.at;
      const extra = burst[i - 1]!.request.label === 'HEAVY_INLINE' ? 0.5 : 0;
      assert.ok(gap >= extra - 1e-9 && gap <= 1 + extra + 1e-9, `gap ${gap}`);
    }
    // Mean spacing 0.5 s, plus 16 × 0.5 s of extra gaps: the burst lasts ~208 s.
    const span = burst.at(-1)!.at - burst[0]!.at;
    assert.ok(Math.abs(span - (399 * 0.5 + 16 * 0.5)) < 12, `span ${span}`);
  });

  it('requests are /v1/completions with max_tokens = OSL and the script’s timeout', () => {
    const r = rs[3]!.request;
    assert.equal(r.api, 'openai-completions');
    assert.equal(r.model, 'meta-llama/Llama-3.3-70B-Instruct');
    assert.equal(r.maxTokens, r.outputTokens);
    assert.equal(r.timeoutS, 10000);
  });

  it('accepts the script’s own option spellings', () => {
    const p = heimdallParamsSchema.parse({ 'heavy-seeds': 4, inline_every: 3, 'burst-start': 1 });
    assert.equal(p.heavySeeds, 4);
    assert.equal(p.inlineEvery, 3);
    assert.equal(p.burstStart, 1);
    assert.throws(() => heimdallParamsSchema.parse({ 'api-key': 'x' }));
  });

  it('script defaults: 1000 requests, 2 heavy seeds', () => {
    const d = heimdallWorkload({}, 1).start();
    assert.equal(d.length, 1000);
    assert.equal(d.filter((s) => s.request.label === 'HEAVY').length, 2);
    assert.equal(d.filter((s) => s.request.label === 'HEAVY_INLINE').length, 19); // 998 // 51
  });

  it('same seed → identical output; different seed → different', () => {
    assert.deepEqual(heimdallWorkload(SEED_002, 1).start(), rs);
    assert.notDeepEqual(heimdallWorkload(SEED_002, 2).start(), rs);
  });
});
