import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { flattenMessages } from '../core/prompt.js';
import { countTokens } from '../engine/tokens.js';
import { burstsWorkload } from './bursts.js';
import { constantTimes, constantWorkload } from './constant.js';
import { dist, distMean, sampleInt } from './dist.js';
import { poissonWorkload } from './poisson.js';
import type { WorkloadRequest } from './types.js';
import { createRng } from '../core/rng.js';

const promptOf = (r: WorkloadRequest): string => r.prompt ?? flattenMessages(r.messages ?? []);
const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

describe('dist', () => {
  it('samples match their means', () => {
    const rng = createRng(7);
    for (const d of [
      dist(42),
      dist({ dist: 'uniform', min: 10, max: 100 }),
      dist({ dist: 'normal', mean: 200, sd: 30 }),
      dist({ dist: 'lognormal', mean: 300, sigma: 0.5 }),
      dist({ dist: 'exponential', mean: 50 }),
      dist({
        dist: 'mixture',
        parts: [
          { weight: 3, dist: 'fixed', value: 10 },
          { weight: 1, dist: 'uniform', min: 100, max: 200 },
        ],
      }),
    ]) {
      const xs = Array.from({ length: 20000 }, () => sampleInt(d, rng));
      const m = distMean(d);
      assert.ok(Math.abs(mean(xs) - m) / m < 0.03, `${d.dist}: ${mean(xs)} vs ${m}`);
    }
  });

  it('integer uniform covers both ends', () => {
    const rng = createRng(1);
    const xs = new Set(
      Array.from({ length: 2000 }, () => sampleInt(dist({ dist: 'uniform', min: 10, max: 20 }), rng)),
    );
    assert.deepEqual(
      [...xs].sort((a, b) => a - b),
      [10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20],
    );
  });

  it('rejects bad shapes', () => {
    assert.throws(() => dist({ dist: 'uniform', min: 5, max: 1 }));
    assert.throws(() => dist(-1));
  });
});

describe('constant', () => {
  it('is k6 constant-arrival-rate: one every 40 s for 40 min is 60 requests', () => {
    const rs = constantWorkload({ rate: 0.025, durationS: 2400 }, 1).start();
    assert.equal(rs.length, 60);
    rs.forEach((s, i) => assert.equal(s.at, i * 40));
    assert.deepEqual(constantTimes(2, 1, Infinity, 3), [1, 1.5, 2]);
  });

  it('prompt and output lengths follow their distributions exactly in tokens', () => {
    const rs = constantWorkload(
      {
        rate: 100,
        count: 3000,
        promptTokens: { dist: 'uniform', min: 230, max: 330 },
        outputTokens: { dist: 'uniform', min: 1820, max: 2620 },
        systemPrompt: { tokens: 200 },
        api: 'ollama-generate',
      },
      3,
    ).start();
    assert.equal(rs.length, 3000);
    const prompts = rs.map((s) => countTokens(promptOf(s.request)));
    const outs = rs.map((s) => s.request.outputTokens);
    assert.ok(Math.min(...prompts) >= 230 && Math.max(...prompts) <= 330);
    assert.ok(Math.min(...outs) >= 1820 && Math.max(...outs) <= 2620);
    assert.ok(Math.abs(mean(prompts) - 280) < 3, `prompt mean ${mean(prompts)}`);
    assert.ok(Math.abs(mean(outs) - 2220) < 20, `output mean ${mean(outs)}`);
    // Every prompt starts with the same 200-token system prompt, then differs (unique tag).
    const sys = promptOf(rs[0]!.request).slice(0, 800);
    for (const s of rs) assert.ok(promptOf(s.request).startsWith(sys + '\n[' + s.request.id + '] '));
  });

  it('chat APIs carry messages whose flattened text is the same size', () => {
    const r = constantWorkload(
      { rate: 1, count: 5, api: 'openai-chat', systemPrompt: { tokens: 50 }, promptTokens: 120 },
      1,
    )
      .start()
      .map((s) => s.request);
    for (const q of r) {
      assert.equal(q.prompt, undefined);
      assert.equal(q.messages?.[0]?.role, 'system');
      assert.equal(countTokens(flattenMessages(q.messages!)), 120);
    }
  });

  it('same seed → identical output; different seed → different', () => {
    const p = { rate: 5, durationS: 60 };
    assert.deepEqual(constantWorkload(p, 9).start(), constantWorkload(p, 9).start());
    assert.notDeepEqual(constantWorkload(p, 9).start(), constantWorkload(p, 10).start());
  });

  it('needs durationS or count', () => {
    assert.throws(() => constantWorkload({ rate: 1 }, 1), /durationS or count/);
  });
});

describe('poisson', () => {
  it('rate and count match the parameters', () => {
    const rs = poissonWorkload({ rate: 20, count: 2000 }, 1).start();
    assert.equal(rs.length, 2000);
    const span = rs.at(-1)!.at;
    assert.ok(Math.abs(2000 / span - 20) < 1, `rate ${2000 / span}`);
    // Exponential gaps: the coefficient of variation is ~1.
    const gaps = rs.slice(1).map((s, i) => s.at - rs[i]!.at);
    const m = mean(gaps);
    const sd = Math.sqrt(mean(gaps.map((g) => (g - m) ** 2)));
    assert.ok(Math.abs(sd / m - 1) < 0.08, `cv ${sd / m}`);
    assert.ok(gaps.every((g) => g >= 0));
  });

  it('stops at durationS', () => {
    const rs = poissonWorkload({ rate: 10, durationS: 100 }, 2).start();
    assert.ok(rs.every((s) => s.at < 100));
    assert.ok(Math.abs(rs.length - 1000) < 120, `${rs.length}`);
  });

  it('same seed → identical output; different seed → different', () => {
    const p = { rate: 20, count: 500 };
    assert.deepEqual(poissonWorkload(p, 4).start(), poissonWorkload(p, 4).start());
    assert.notDeepEqual(poissonWorkload(p, 4).start(), poissonWorkload(p, 5).start());
  });
});

describe('bursts', () => {
  it('sends burstRate inside bursts and baseRate between them', () => {
    const p = {
      baseRate: 1,
      burstRate: 50,
      burstDurationS: 5,
      periodS: 30,
      firstBurstS: 10,
      durationS: 3010,
    };
    const times = burstsWorkload(p, 1)
      .start()
      .map((s) => s.at);
    const inBurst = (t: number): boolean => t >= 10 && (t - 10) % 30 < 5;
    const burstCount = times.filter(inBurst).length;
    const baseCount = times.length - burstCount;
    // 100 bursts × 5 s × 50/s = 25000; base: 3010 − 500 s at 1/s ≈ 2510.
    assert.ok(Math.abs(burstCount / 25000 - 1) < 0.03, `burst ${burstCount}`);
    assert.ok(Math.abs(baseCount / 2510 - 1) < 0.06, `base ${baseCount}`);
    assert.ok(times.every((t, i) => i === 0 || t >= times[i - 1]!));
  });

  it('constant process spaces burst arrivals evenly', () => {
    const times = burstsWorkload(
      { burstRate: 10, burstDurationS: 1, periodS: 10, durationS: 20, process: 'constant' },
      1,
    )
      .start()
      .map((s) => s.at);
    assert.deepEqual(
      times.map((t) => Math.round(t * 10) / 10),
      [
        0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 10, 10.1, 10.2, 10.3, 10.4, 10.5, 10.6, 10.7, 10.8,
        10.9,
      ],
    );
  });

  it('rejects a burst longer than its period', () => {
    assert.throws(
      () => burstsWorkload({ burstRate: 1, burstDurationS: 5, periodS: 2, durationS: 10 }, 1),
      /periodS/,
    );
  });
});
