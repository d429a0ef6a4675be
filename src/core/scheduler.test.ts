import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Scheduler } from './scheduler.js';
import { createPolicy } from './policies/index.js';
import { createRng } from './rng.js';
import { HOLD } from './types.js';
import type { BackendSpec, Decision, Policy, RequestInfo } from './types.js';

function spec(name: string, over: Partial<BackendSpec> = {}): BackendSpec {
  return { name, api: 'ollama', models: ['m'], maxConcurrency: Infinity, weight: 1, ...over };
}
function req(id: string, model = 'm'): RequestInfo {
  return { id, model, api: 'ollama', arrivedAt: 0, promptText: 'hi' };
}
const ok = { ok: true, dispatchedAt: 0, finishedAt: 1 };
function dispatched(ds: Decision[]): string[] {
  return ds
    .filter((d) => d.type === 'dispatch')
    .map((d) => `${d.request.id}->${(d as { backend: string }).backend}`);
}
function sched(policy = 'least-connections'): Scheduler {
  return new Scheduler({ policy: createPolicy(policy, createRng(1)) });
}

test('never pushes beyond a cap; waiters go FIFO as slots free', () => {
  const s = sched();
  s.addBackend(spec('a', { maxConcurrency: 1 }));
  s.addBackend(spec('b', { maxConcurrency: 1 }));
  assert.deepEqual(dispatched(s.submit(req('1'), 0)), ['1->a']);
  assert.deepEqual(dispatched(s.submit(req('2'), 0)), ['2->b']);
  assert.deepEqual(s.submit(req('3'), 0), []);
  assert.deepEqual(s.submit(req('4'), 0), []);
  assert.equal(s.queueLength, 2);
  assert.deepEqual(dispatched(s.complete('2', ok, 5)), ['3->b']);
  assert.deepEqual(dispatched(s.complete('1', ok, 6)), ['4->a']);
  assert.equal(s.queueLength, 0);
  for (const b of s.backendViews()) assert.ok(b.inFlight <= b.maxConcurrency);
});

test('a request goes only to backends serving its model; none eligible → reject', () => {
  const s = sched('round-robin');
  s.addBackend(spec('a', { models: ['x'] }));
  s.addBackend(spec('b', { models: ['y'] }));
  for (let i = 0; i < 4; i++) assert.deepEqual(dispatched(s.submit(req(`r${i}`, 'y'), 0)), [`r${i}->b`]);
  const d = s.submit(req('z', 'nope'), 0);
  assert.equal(d[0]?.type, 'reject');
  s.setHealth('b', false, 0);
  assert.equal(s.submit(req('q', 'y'), 0)[0]?.type, 'reject');
});

test('retry excludes tried backends; all tried → reject', () => {
  const s = sched();
  s.addBackend(spec('a'));
  s.addBackend(spec('b'));
  assert.deepEqual(dispatched(s.submit(req('1'), 0)), ['1->a']);
  s.complete('1', { ...ok, ok: false }, 1);
  assert.deepEqual(dispatched(s.submit(req('1'), 1, new Set(['a']))), ['1->b']);
  s.complete('1', { ...ok, ok: false }, 2);
  assert.equal(s.submit(req('1'), 2, new Set(['a', 'b']))[0]?.type, 'reject');
});

test('queued requests are rejected when their last backend turns unhealthy', () => {
  const s = sched();
  s.addBackend(spec('a', { maxConcurrency: 1 }));
  s.submit(req('1'), 0);
  s.submit(req('2'), 0);
  const d = s.setHealth('a', false, 1);
  assert.deepEqual(
    d.map((x) => [x.type, x.request.id]),
    [['reject', '2']],
  );
  // the in-flight one still settles and the count returns to zero
  s.complete('1', ok, 2);
  assert.equal(s.backend('a')?.inFlight, 0);
});

test('cancel drops a queued request or frees a pushed slot; complete is idempotent', () => {
  const s = sched();
  s.addBackend(spec('a', { maxConcurrency: 1 }));
  s.submit(req('1'), 0);
  s.submit(req('2'), 0);
  s.submit(req('3'), 0);
  assert.equal(s.cancel('2', 1).known, true);
  assert.deepEqual(dispatched(s.cancel('1', 1).decisions), ['3->a']);
  assert.deepEqual(s.complete('1', ok, 2), []);
  s.complete('3', ok, 3);
  assert.equal(s.backend('a')?.inFlight, 0);
  assert.equal(s.inFlightTotal, 0);
  assert.equal(s.cancel('nope', 3).known, false);
});

test('draining stops new requests; removal waits for in-flight to settle', () => {
  const s = sched();
  s.addBackend(spec('a'));
  s.addBackend(spec('b'));
  s.setDraining('a', true, 0);
  for (let i = 0; i < 3; i++) assert.deepEqual(dispatched(s.submit(req(`${i}`), 0)), [`${i}->b`]);
  s.removeBackend('b', 1);
  assert.equal(s.backend('b'), undefined);
  assert.equal(s.submit(req('x'), 1)[0]?.type, 'reject');
  for (let i = 0; i < 3; i++) s.complete(`${i}`, ok, 2);
  assert.equal(s.inFlightTotal, 0);
  s.addBackend(spec('b'));
  assert.equal(s.backend('b')?.inFlight, 0);
});

test('raising a cap at run time lets waiters go', () => {
  const s = sched();
  s.addBackend(spec('a', { maxConcurrency: 1 }));
  s.submit(req('1'), 0);
  s.submit(req('2'), 0);
  assert.deepEqual(dispatched(s.updateBackend('a', { maxConcurrency: 2 }, 1)), ['2->a']);
});

test('queue bound and queue timeout reject instead of growing forever', () => {
  const s = new Scheduler({ policy: createPolicy('round-robin', createRng(1)), maxQueueLength: 1 });
  s.addBackend(spec('a', { maxConcurrency: 1 }));
  s.submit(req('1'), 0);
  assert.deepEqual(s.submit(req('2'), 0), []);
  assert.equal(s.submit(req('3'), 0)[0]?.type === 'reject' && s.submit(req('4'), 0)[0]?.type, 'reject');
  const e = s.expire(1000, 500);
  assert.deepEqual(
    e.map((d) => [d.request.id, d.type === 'reject' ? d.reason : '']),
    [['2', 'queue-timeout']],
  );
});

test('a holding policy keeps requests queued until pump finds it willing', () => {
  let willing = false;
  const s = new Scheduler({
    policy: { name: 'hold', pick: (_r, c) => (willing ? c[0]! : HOLD.retry) },
  });
  s.addBackend(spec('a'));
  assert.deepEqual(s.submit(req('1'), 0), []);
  willing = true;
  assert.deepEqual(dispatched(s.pump(1)), ['1->a']);
});

test('the fleet model union follows adds, updates and removals', () => {
  const s = sched();
  s.addBackend(spec('a', { models: ['x'] }));
  assert.deepEqual([...s.models()], ['x']);
  s.addBackend(spec('b', { models: ['y'] }));
  assert.deepEqual([...s.models()].sort(), ['x', 'y']);
  s.updateBackend('a', { models: ['z'] }, 0);
  assert.deepEqual([...s.models()].sort(), ['y', 'z']);
  s.removeBackend('b', 0);
  assert.deepEqual([...s.models()], ['z']);
});

test('holds one by one until a backend changes: a smaller request that joins is asked alone, the held are not asked again', () => {
  // Fits a backend that is idle, or whose in-flight count leaves room for the prompt's length.
  const asked: string[] = [];
  const policy: Policy = {
    name: 'by-size',
    traits: { holdsIgnoreMetrics: true },
    pick(r, c) {
      asked.push(r.id);
      return (
        c.find((b) => b.inFlight === 0 || r.promptText.length <= 10 - 5 * b.inFlight) ?? HOLD.untilChange
      );
    },
  };
  const s = new Scheduler({ policy });
  s.addBackend(spec('a'));
  const sized = (id: string, len: number): RequestInfo => ({ ...req(id), promptText: 'x'.repeat(len) });
  assert.deepEqual(dispatched(s.submit(sized('A', 3), 0)), ['A->a']);
  assert.deepEqual(s.submit(sized('B', 8), 1), []); // needs more than a's room: held
  assert.deepEqual(dispatched(s.submit(sized('C', 2), 2)), ['C->a']); // fits: goes past B
  assert.deepEqual(s.submit(sized('D', 9), 3), []);
  assert.deepEqual(asked, ['A', 'B', 'C', 'D']); // B was not asked again when C or D came
  // Metrics the policy's holds do not read ask nobody again; a completion asks every held one.
  s.setMetrics('a', { running: 2, waiting: 0, kvUsage: 0.5, at: 4 });
  assert.deepEqual(s.pump(4), []);
  assert.deepEqual(asked, ['A', 'B', 'C', 'D']);
  assert.deepEqual(dispatched(s.complete('A', ok, 5)), []);
  assert.deepEqual(asked, ['A', 'B', 'C', 'D', 'B', 'D']);
  assert.deepEqual(dispatched(s.complete('C', ok, 6)), ['B->a']);
  assert.equal(s.queueLength, 1);
});

test('a fit gate: held requests are asked only once a candidate has room for them, in arrival order', () => {
  // Each backend has 10 units of room less 3 per request in flight (an idle one takes anything);
  // a request's size is in its id. It goes where the room is largest; one that fits nowhere is
  // held until a change, and the fit gate says the same, so the scheduler asks it only then.
  const units = (b: { inFlight: number }): number => (b.inFlight === 0 ? Infinity : 10 - 3 * b.inFlight);
  const size = (r: RequestInfo): number => Number(r.id.split('-')[1]);
  const asked: string[] = [];
  const policy: Policy = {
    name: 'fits',
    traits: { holdsIgnoreMetrics: true, fitGate: { size, bound: (c) => Math.max(...c.map(units)) } },
    pick(r, c) {
      asked.push(r.id);
      let best: (typeof c)[number] | undefined;
      for (const b of c) if (units(b) >= size(r) && (!best || units(b) > units(best))) best = b;
      return best ?? HOLD.untilChange;
    },
  };
  const s = new Scheduler({ policy });
  s.addBackend(spec('a'));
  s.addBackend(spec('b'));
  assert.deepEqual(dispatched(s.submit(req('r1-1'), 0)), ['r1-1->a']);
  s.setHealth('a', false, 0);
  // Only b: room ∞ (idle), 7, 4, 1 as it fills.
  assert.deepEqual(dispatched(s.submit(req('r2-1'), 0)), ['r2-1->b']);
  for (const id of ['r3-8', 'r4-6', 'r5-6', 'r6-8', 'r7-2']) s.submit(req(id), 1);
  assert.equal(s.queueLength, 3, 'r3-8, r5-6 and r6-8 held; r4-6 and r7-2 went to b');
  asked.length = 0;
  // a's request ends while a is down: nothing fits b's room of 1, and none is asked.
  assert.deepEqual(dispatched(s.complete('r1-1', ok, 2)), []);
  assert.deepEqual(asked, [], 'no held request asked while none fits');
  // a is back, idle: every held one may go. r3-8 takes a (room 7 after it), r5-6 fits there
  // too; r6-8 then fits nowhere (4 and 1) and is not asked.
  assert.deepEqual(dispatched(s.setHealth('a', true, 3)), ['r3-8->a', 'r5-6->a']);
  assert.deepEqual(asked, ['r3-8', 'r5-6']);
  asked.length = 0;
  // b frees one (room 4): still not 8.
  assert.deepEqual(dispatched(s.complete('r7-2', ok, 4)), []);
  assert.deepEqual(asked, []);
  // b frees another (room 7), then a its last but one (room 7): still not; then a idle.
  assert.deepEqual(dispatched(s.complete('r4-6', ok, 5)), []);
  assert.deepEqual(dispatched(s.complete('r5-6', ok, 6)), []);
  assert.deepEqual(asked, []);
  assert.deepEqual(dispatched(s.complete('r3-8', ok, 7)), ['r6-8->a']);
  assert.deepEqual(asked, ['r6-8']);
  assert.equal(s.queueLength, 0);
});

test('priority: a held request of higher priority goes first; equal priorities keep the queue order', () => {
  for (const policy of ['least-connections', 'estimated-wait']) {
    const s = sched(policy);
    s.addBackend(spec('a', { maxConcurrency: 1 }));
    const p = (id: string, priority: number | undefined, at: number): RequestInfo => ({
      ...req(id),
      arrivedAt: at,
      ...(priority !== undefined ? { priority } : {}),
    });
    assert.deepEqual(dispatched(s.submit(p('0', undefined, 0), 0)), ['0->a']);
    s.submit(p('low', -1, 1), 1);
    s.submit(p('plain', undefined, 2), 2);
    s.submit(p('high', 2, 3), 3);
    s.submit(p('high2', 2, 4), 4);
    s.submit(p('zero', 0, 5), 5);
    const order: string[] = [];
    let last = '0';
    for (let t = 10; s.queueLength > 0; t++) {
      const d = dispatched(s.complete(last, ok, t));
      assert.equal(d.length, 1, `${policy}: one slot frees, one goes`);
      last = d[0]!.split('->')[0]!;
      order.push(last);
    }
    assert.deepEqual(order, ['high', 'high2', 'plain', 'zero', 'low'], policy);
  }
});
