import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Scheduler } from '../core/scheduler.js';
import { createPolicy } from '../core/policies/index.js';
import { createRng } from '../core/rng.js';
import { HOLD, isHold } from '../core/types.js';
import type { BackendSpec, BackendView, PickResult, Policy, RequestInfo } from '../core/types.js';
import { allowancePick, type AllowanceWait } from './allowance-pick.js';

function spec(name: string): BackendSpec {
  return { name, api: 'openai', models: ['m'], maxConcurrency: 4, weight: 1 };
}
function req(id: string): RequestInfo {
  return { id, model: 'm', api: 'openai', arrivedAt: 0, promptText: 'hello there' };
}
/** Two idle backends a and b (cap 4) as the scheduler shows them. */
function views(): { a: BackendView; b: BackendView } {
  const s = new Scheduler({ policy: createPolicy('least-connections', createRng(1)) });
  s.addBackend(spec('a'));
  s.addBackend(spec('b'));
  return { a: s.backend('a')!, b: s.backend('b')! };
}
const name = (r: PickResult): string => (isHold(r) ? `hold:${r.hold}` : r.name);

/** A router's gate with these allowances and the others' in-flight counts (both changeable). */
function gate(inner: Policy['pick']) {
  const allowance = new Map<string, number>();
  const others = new Map<string, number>();
  const waitingFor = new Map<string, AllowanceWait>();
  const waits = { count: 0, totalMs: 0 };
  let t = 0;
  let nudges = 0;
  const pick = allowancePick(
    inner,
    {
      othersOf: (n) => others.get(n) ?? 0,
      allowance: (n) => allowance.get(n),
      nudge: () => nudges++,
      now: () => t,
    },
    waitingFor,
    waits,
  );
  return {
    pick,
    allowance,
    others,
    waitingFor,
    waits,
    tick: (ms: number) => (t += ms),
    nudges: () => nudges,
  };
}

test('a request waiting for allowance goes where estimated-wait chose it, not where its re-picks rotate to', () => {
  // Two identical idle backends: a tie, broken round-robin from a cursor every pick advances. The
  // request waits for allowance on a; re-asked, the policy would now say b, where this router has
  // allowance: before the fix it went there (allowance chose, not the policy).
  const { a, b } = views();
  const ew = createPolicy('estimated-wait', createRng(1));
  const g = gate((r, c, at) => ew.pick(r, c, at));
  g.allowance.set('a', 0).set('b', 1);
  assert.equal(name(g.pick(req('1'), [a, b], 0)), 'hold:retry');
  assert.equal(g.waitingFor.get('1')?.backend, 'a');
  assert.ok(g.nudges() >= 1, 'allowance asked for at once');
  g.tick(5);
  assert.equal(name(g.pick(req('1'), [a, b], 5)), 'hold:retry');
  assert.equal(name(g.pick(req('1'), [a, b], 5)), 'hold:retry');
  g.tick(15);
  g.allowance.set('a', 1);
  assert.equal(name(g.pick(req('1'), [a, b], 20)), 'a');
  assert.equal(g.waitingFor.size, 0);
  assert.deepEqual(g.waits, { count: 1, totalMs: 20 });
});

test('the backend waited for stays a choice when the others fill it; the policy decides', () => {
  const { a, b } = views();
  // Prefers a (say, it holds the prompt's prefix) while it may, else b.
  let prefer = 'a';
  const asked: string[][] = [];
  const g = gate((_r, c) => {
    asked.push(c.map((v) => v.name));
    return c.find((v) => v.name === prefer) ?? c[0]!;
  });
  g.allowance.set('a', 0).set('b', 4);
  assert.equal(name(g.pick(req('1'), [a, b], 0)), 'hold:retry');
  // The other routers fill a (4 of its cap of 4): before the fix a was dropped and the request went
  // to b, where its prefix is not.
  g.others.set('a', 4);
  assert.equal(name(g.pick(req('1'), [a, b], 1)), 'hold:retry');
  assert.deepEqual(asked.at(-1), ['a', 'b']);
  assert.equal(g.waitingFor.get('1')?.backend, 'a');
  // b full too: only a, full, is left: held on load, still waiting there.
  g.others.set('b', 4);
  g.tick(7);
  assert.equal(g.pick(req('1'), [a, b], 2), HOLD.load);
  assert.equal(g.waitingFor.get('1')?.at, 7, 'still asked for');
  g.others.set('b', 0);
  // The policy may also prefer to go elsewhere than wait for a full backend.
  prefer = 'b';
  assert.equal(name(g.pick(req('1'), [a, b], 3)), 'b');
  assert.equal(g.waitingFor.size, 0);
  assert.equal(g.waits.count, 1);
});

test('a held request whose full backend frees in the fleet and gets allowance goes there', () => {
  const { a, b } = views();
  const g = gate((_r, c) => c[0]!);
  g.allowance.set('a', 0).set('b', 0);
  g.others.set('a', 3);
  assert.equal(name(g.pick(req('1'), [a, b], 0)), 'hold:retry');
  g.others.set('a', 4);
  g.others.set('b', 4);
  assert.equal(g.pick(req('1'), [a, b], 1), HOLD.load);
  g.others.set('a', 2);
  g.allowance.set('a', 1);
  assert.equal(name(g.pick(req('1'), [a, b], 2)), 'a');
  assert.equal(g.waits.count, 1);
});

test('no room anywhere in the fleet: held on load, the policy not asked', () => {
  const { a, b } = views();
  const g = gate(() => assert.fail('not asked'));
  g.others.set('a', 4).set('b', 4);
  assert.equal(g.pick(req('1'), [a, b], 0), HOLD.load);
  assert.equal(g.waitingFor.size, 0);
});
