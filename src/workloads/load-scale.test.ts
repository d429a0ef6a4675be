import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { getWorkloadType } from './index.js';
import type { ClientDriver, ScheduledRequest } from './types.js';

/** A type's driver at ×k (k = 1: bound without a multiple, as a plain scenario is). */
function driverAt(type: string, params: Record<string, unknown>, k?: number): ClientDriver {
  const r = getWorkloadType(type)!.bind(params, k);
  if (!r.success) throw r.error;
  return r.create(1);
}

const ids = (rs: readonly ScheduledRequest[]): string[] => rs.map((r) => r.request.id);

describe('load multiples (×k) per workload type', () => {
  it('×1 is the params as given: the same requests at the same times', () => {
    const p = { rate: 3, durationS: 20, promptTokens: { dist: 'uniform', min: 10, max: 90 } };
    assert.deepEqual(driverAt('poisson', p, 1).start(), driverAt('poisson', p).start());
  });

  it('open loop: k× the rate over the same window, request i unchanged at at / k', () => {
    const p = { rate: 2, durationS: 30 };
    const one = driverAt('poisson', p).start();
    const three = driverAt('poisson', p, 3).start();
    assert.ok(three.length > 2.4 * one.length && three.length < 3.6 * one.length, `${three.length}`);
    assert.ok(three.every((r) => r.at < 30));
    // The first n requests are the ×1 run's, each sent k× sooner.
    for (let i = 0; i < 10; i++) {
      const a = one[i]!;
      const b = three[i]!;
      assert.deepEqual({ ...b.request, id: '' }, { ...a.request, id: '' });
      assert.ok(Math.abs(b.at - a.at / 3) < 1e-9);
    }
    // A count bound scales with the rate: the same span, k× the requests.
    assert.equal(driverAt('constant', { rate: 1, count: 8 }, 2).start().length, 16);
    assert.equal(driverAt('task-mix', { rate: 5, count: 10 }, 1.5).start().length, 15);
  });

  it('prefix-heavy: k× the rate (documents and agent sessions)', () => {
    for (const shape of ['documents', 'agents']) {
      const p = { shape, rate: 2, durationS: 600 };
      const one = driverAt('prefix-heavy', p).start().length;
      const three = driverAt('prefix-heavy', p, 3).start().length;
      assert.ok(three > 2.3 * one && three < 3.7 * one, `${shape}: ${one} → ${three}`);
    }
  });

  it('bursts keep their timing, k× as intense', () => {
    const p = { burstRate: 10, burstDurationS: 1, periodS: 10, durationS: 30, process: 'constant' };
    const one = driverAt('bursts', p).start();
    const two = driverAt('bursts', p, 2).start();
    assert.equal(two.length, 2 * one.length);
    assert.ok(two.every((r) => r.at % 10 < 1));
  });

  it('closed loop: k× the clients, client i unchanged', () => {
    const p = { clients: 3, durationS: 60, conversations: 1 };
    const one = driverAt('multi-turn', p).start();
    const two = driverAt('multi-turn', p, 2).start();
    assert.equal(two.length, 2 * one.length);
    for (const r of one)
      assert.deepEqual(
        two.find((x) => x.request.id === r.request.id),
        r,
      );
    const tot = driverAt('tree-of-thought', { clients: 2, trees: 1 }, 3).start();
    assert.equal(tot.length, 6); // one root per client
  });

  it('a trace is replayed k× faster, cut at the same durationS', () => {
    const p = join(mkdtempSync(join(tmpdir(), 'llmlb-scale-')), 't.jsonl');
    writeFileSync(
      p,
      Array.from({ length: 10 }, (_, i) =>
        JSON.stringify({ at: i * 2, prompt: `p${i}`, outputTokens: 4 }),
      ).join('\n'),
    );
    const one = driverAt('trace', { path: p, durationS: 10 }).start();
    const two = driverAt('trace', { path: p, durationS: 10 }, 2).start();
    assert.deepEqual(ids(one), ['l1', 'l2', 'l3', 'l4', 'l5']);
    assert.equal(two.length, 10);
    assert.deepEqual(
      two.map((r) => r.at),
      Array.from({ length: 10 }, (_, i) => i),
    );
  });

  it('heimdall: the same script k× faster; a mix scales each part by its own rule', () => {
    const h = { total: 20, heavySeeds: 2 };
    const one = driverAt('heimdall', h).start();
    const four = driverAt('heimdall', h, 4).start();
    assert.deepEqual(ids(four), ids(one));
    four.forEach((r, i) => assert.ok(Math.abs(r.at - one[i]!.at / 4) < 1e-9));
    const mix = {
      durationS: 20,
      parts: [
        { type: 'constant', rate: 1, idPrefix: 'o' },
        { type: 'multi-turn', clients: 2, conversations: 1, idPrefix: 'c' },
      ],
    };
    const m1 = driverAt('mix', mix).start();
    const m2 = driverAt('mix', mix, 2).start();
    assert.equal(m2.filter((r) => r.request.id.startsWith('o')).length, 40);
    assert.equal(m2.filter((r) => r.request.id.startsWith('c')).length, 4);
    assert.equal(m1.length, 22);
  });
});
