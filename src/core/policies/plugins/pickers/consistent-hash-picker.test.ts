import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backendView, makePlugin, requestInfo, listOf } from '../../../testing.js';

const none = new Float64Array(16);
const fleet = Array.from({ length: 6 }, (_, i) => backendView(`b${i}`, i));
const pick = (p: ReturnType<typeof make>, key: string | undefined, bs = fleet) =>
  listOf(p.pick(requestInfo(`r-${key}`, '', { sessionKey: key }), bs, none, 0))[0]?.name;
const make = (params: Record<string, unknown> = {}) => makePlugin('picker', 'consistent-hash-picker', params);

test('the same session key always lands on the same backend; keys spread over all', () => {
  const p = make();
  const home = new Map<string, string>();
  for (let u = 0; u < 600; u++) home.set(`user${u}`, pick(p, `user${u}`)!);
  for (let u = 0; u < 600; u++) assert.equal(pick(p, `user${u}`), home.get(`user${u}`));
  const counts = new Map<string, number>();
  for (const b of home.values()) counts.set(b, (counts.get(b) ?? 0) + 1);
  assert.equal(counts.size, 6);
  for (const c of counts.values()) assert.ok(c > 50 && c < 170, `share ${c}/600`);
});

test('an unavailable home is skipped by walking the ring; the key returns when it is back', () => {
  const p = make();
  const home = pick(p, 'alice')!;
  const others = fleet.filter((b) => b.name !== home);
  const stand = pick(p, 'alice', others)!;
  assert.notEqual(stand, home);
  // Walking is stable: the same stand-in every time while home is away.
  assert.equal(pick(p, 'alice', others), stand);
  assert.equal(pick(p, 'alice'), home);
});

test('removing a backend moves only its keys', () => {
  const p = make();
  const before = new Map<string, string>();
  for (let u = 0; u < 300; u++) before.set(`u${u}`, pick(p, `u${u}`)!);
  p.onBackendRemoved!('b2');
  const rest = fleet.filter((b) => b.name !== 'b2');
  for (const [k, b] of before) {
    const now = pick(p, k, rest)!;
    if (b !== 'b2') assert.equal(now, b);
    else assert.notEqual(now, 'b2');
  }
});

test('no session key: least outstanding, ties in rotation', () => {
  const p = make();
  const bs = [backendView('a', 0, { inFlight: 2 }), backendView('b', 1), backendView('c', 2)];
  assert.deepEqual([pick(p, undefined, bs), pick(p, undefined, bs), pick(p, '', bs)], ['b', 'c', 'b']);
  assert.equal(pick(p, 'x', []), undefined);
});

test('weights scale shares; bad parameters are refused', () => {
  const p = make();
  const bs = [backendView('big', 0, { weight: 4 }), backendView('small', 1, { weight: 1 })];
  let big = 0;
  for (let u = 0; u < 1000; u++) if (pick(p, `k${u}`, bs) === 'big') big++;
  assert.ok(big > 700 && big < 900, `big got ${big}/1000`);
  assert.throws(() => make({ virtualNodes: 0 }), /virtualNodes/);
  assert.throws(() => make({ vnodes: 10 }), /vnodes/);
});
