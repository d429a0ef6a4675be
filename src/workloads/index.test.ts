import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { createWorkload, getWorkloadType, workloadTypeNames } from './index.js';
import type { ClientDriver, ScheduledRequest } from './types.js';

/** Run a driver against a server that answers everything in 2 s. */
function run(d: ClientDriver): ScheduledRequest[] {
  const out: ScheduledRequest[] = [];
  let q = d.start();
  while (q.length > 0 && out.length < 5000) {
    q.sort((a, b) => a.at - b.at || a.request.id.localeCompare(b.request.id));
    const s = q.shift()!;
    out.push(s);
    q = q.concat(d.onFinish(s.request.id, s.at + 2, true, `ok ${s.request.id} `));
  }
  return out;
}

const trace = join(mkdtempSync(join(tmpdir(), 'llmlb-wl-')), 't.jsonl');
writeFileSync(
  trace,
  '{"at": 0, "promptTokens": 10, "outputTokens": 5}\n{"at": 1, "promptTokens": 20, "outputTokens": 5}\n',
);

const SPECS: ({ type: string } & Record<string, unknown>)[] = [
  { type: 'constant', rate: 2, durationS: 30 },
  { type: 'poisson', rate: 2, durationS: 30 },
  { type: 'bursts', burstRate: 5, burstDurationS: 2, periodS: 10, durationS: 30 },
  { type: 'bursty', rate: 2, cv: 2, modulation: { windowS: 10, cv: 0.5 }, durationS: 30 },
  { type: 'heimdall', total: 60, heavySeeds: 4 },
  { type: 'multi-turn', clients: 3, durationS: 60 },
  { type: 'tree-of-thought', clients: 2, durationS: 60 },
  { type: 'task-mix', count: 50 },
  { type: 'trace', path: trace },
  { type: 'prefix-heavy', shape: 'mixed', rate: 2, durationS: 30 },
  {
    type: 'mix',
    durationS: 60,
    parts: [
      { type: 'tree-of-thought', clients: 1, branching: 4, idPrefix: 'big' },
      { type: 'multi-turn', clients: 2 },
    ],
  },
];

describe('workload registry', () => {
  it('knows every generator', () => {
    assert.deepEqual(workloadTypeNames().sort(), SPECS.map((s) => s.type).sort());
  });

  for (const spec of SPECS) {
    it(`${spec.type}: same seed → deep-equal; different seed → different`, () => {
      const a = run(createWorkload(spec, 11));
      assert.ok(a.length > 0);
      assert.deepEqual(run(createWorkload(spec, 11)), a);
      if (spec.type !== 'trace') assert.notDeepEqual(run(createWorkload(spec, 12)), a);
      // Ids are unique and sends are in time order per start().
      assert.equal(new Set(a.map((s) => s.request.id)).size, a.length);
    });
  }

  it('bind reports bad params with their path', () => {
    const r = getWorkloadType('constant')!.bind({ rate: -1, durationS: 5 });
    assert.equal(r.success, false);
    if (!r.success) assert.deepEqual(r.error.issues[0]!.path, ['rate']);
    assert.throws(() => createWorkload({ type: 'nope' }, 1), /unknown workload type 'nope'/);
  });

  it("a bound open-loop workload keeps its last seed's driver; closed-loop ones are made anew", () => {
    const bound = getWorkloadType('task-mix')!.bind({ count: 50 });
    assert.ok(bound.success);
    const a = bound.create(1);
    assert.equal(a.reusable, true);
    assert.equal(bound.create(1), a);
    // Each start() is a new array of the same requests, so a caller may sort or filter its own.
    const first = a.start();
    first.reverse();
    const again = a.start();
    assert.notEqual(again, first);
    assert.deepEqual(again, createWorkload({ type: 'task-mix', count: 50 }, 1).start());
    assert.equal(again[0]!.request, first[first.length - 1]!.request);
    const b = bound.create(2);
    assert.notEqual(b, a);
    assert.notDeepEqual(b.start(), again);
    assert.equal(bound.create(1) === a, false); // only the last seed is kept
    const turns = getWorkloadType('multi-turn')!.bind({ clients: 2, durationS: 10 });
    assert.ok(turns.success);
    assert.notEqual(turns.create(1), turns.create(1));
  });

  it('generates thousands of requests up front', () => {
    const n = createWorkload({ type: 'task-mix', count: 5000 }, 1).start().length;
    const h = createWorkload({ type: 'heimdall', total: 800, heavySeeds: 400 }, 1).start().length;
    assert.equal(n + h, 5800);
  });
});
