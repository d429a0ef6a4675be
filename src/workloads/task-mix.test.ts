import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { countTokens } from '../engine/tokens.js';
import { SEED_004_TASKS, sizeClass, taskMixWorkload } from './task-mix.js';

// The performance-aware router Table 3: samples, mean prompt, mean decode, share of heavy decodes.
const TABLE_3: Record<string, [number, number, number, number]> = {
  translation: [7351, 29.09, 61.76, 0.0918],
  qna: [6988, 29.83, 334.4, 0.5818],
  sentiment: [6564, 211.54, 142.53, 0.4101],
  'in-context-qna': [7122, 125.16, 220.02, 0.4795],
  'entity-recognition': [3304, 26.41, 64.1, 0.0871],
};

const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

describe('task-mix (the performance-aware router)', () => {
  const N = 20000;
  const rs = taskMixWorkload({ count: N }, 1).start();

  it('sends count requests at ~20 rps (Poisson)', () => {
    assert.equal(rs.length, N);
    assert.ok(Math.abs(N / rs.at(-1)!.at - 20) < 0.5);
  });

  it('task shares, prompt/decode means and heavy-decode shares match Table 3', () => {
    const total = Object.values(TABLE_3).reduce((s, t) => s + t[0], 0);
    for (const [task, [samples, prompt, decode, heavy]] of Object.entries(TABLE_3)) {
      const mine = rs.filter((s) => s.request.task === task).map((s) => s.request);
      assert.ok(Math.abs(mine.length / N - samples / total) < 0.012, `${task} share ${mine.length / N}`);
      const p = mean(mine.map((r) => countTokens(r.prompt!)));
      const d = mean(mine.map((r) => r.outputTokens));
      const h = mine.filter((r) => r.outputTokens >= 250).length / mine.length;
      assert.ok(Math.abs(p / prompt - 1) < 0.04, `${task} prompt mean ${p} vs ${prompt}`);
      assert.ok(Math.abs(d / decode - 1) < 0.04, `${task} decode mean ${d} vs ${decode}`);
      assert.ok(Math.abs(h - heavy) < 0.025, `${task} heavy share ${h} vs ${heavy}`);
      assert.ok(
        mine.every((r) => countTokens(r.prompt!) <= 1000),
        'prompts were capped at 1000 tokens',
      );
    }
  });

  it('LL/LH/HL/HH mix matches what the length profiles imply', () => {
    // Uniform prompts and two-part decode mixtures make the expected class shares exact.
    const weights = SEED_004_TASKS.reduce((s, t) => s + t.weight, 0);
    const expected: Record<string, number> = { LL: 0, LH: 0, HL: 0, HH: 0 };
    for (const t of SEED_004_TASKS) {
      const pd = t.promptTokens as { min: number; max: number };
      const pHeavy = Math.max(0, pd.max - Math.max(pd.min, 100) + 1) / (pd.max - pd.min + 1);
      const parts = (t.outputTokens as { parts: { weight: number }[] }).parts;
      const dHeavy = parts[1]!.weight / (parts[0]!.weight + parts[1]!.weight);
      const w = t.weight / weights;
      expected.LL! += w * (1 - pHeavy) * (1 - dHeavy);
      expected.LH! += w * (1 - pHeavy) * dHeavy;
      expected.HL! += w * pHeavy * (1 - dHeavy);
      expected.HH! += w * pHeavy * dHeavy;
    }
    for (const cls of ['LL', 'LH', 'HL', 'HH'] as const) {
      const got = rs.filter((s) => s.request.sizeClass === cls).length / N;
      assert.ok(Math.abs(got - expected[cls]!) < 0.012, `${cls}: ${got} vs ${expected[cls]}`);
    }
    // ELI5 is the light-prompt/heavy-decode task, IMDb the heavy-prompt/light-decode one.
    const qna = rs.filter((s) => s.request.task === 'qna');
    assert.ok(qna.every((s) => s.request.sizeClass![0] === 'L'));
  });

  it('labels each request task/CLASS, consistent with its lengths', () => {
    for (const { request: r } of rs.slice(0, 500)) {
      assert.equal(r.label, `${r.task}/${r.sizeClass}`);
      assert.equal(r.sizeClass, sizeClass(countTokens(r.prompt!), r.outputTokens, 100, 250));
    }
  });

  it('prompts carry the task instruction (Appendix C.5.1)', () => {
    const first = (task: string) =>
      rs
        .filter((s) => s.request.task === task)
        .slice(0, 50)
        .map((s) => s.request.prompt!);
    assert.ok(first('translation').every((p) => /Please translate this text into \w+\./.test(p)));
    assert.ok(
      first('entity-recognition').every((p) =>
        /Can you identify the (person|place|object) mentioned/.test(p),
      ),
    );
    assert.ok(
      first('in-context-qna').every((p) => p.includes('Select the correct option and provide reasoning')),
    );
    assert.ok(first('sentiment').every((p) => /review|movie/.test(p)));
  });

  it('custom tasks and thresholds', () => {
    const r = taskMixWorkload(
      {
        count: 100,
        arrival: 'constant',
        rate: 10,
        heavyPromptTokens: 50,
        tasks: [{ name: 'x', weight: 1, promptTokens: 60, outputTokens: 10 }],
      },
      1,
    ).start();
    assert.ok(r.every((s) => s.request.label === 'x/HL'));
    assert.equal(r[10]!.at, 1);
  });

  it('same seed → identical output; different seed → different', () => {
    assert.deepEqual(taskMixWorkload({ count: 300 }, 5).start(), taskMixWorkload({ count: 300 }, 5).start());
    assert.notDeepEqual(
      taskMixWorkload({ count: 300 }, 5).start(),
      taskMixWorkload({ count: 300 }, 6).start(),
    );
  });
});
