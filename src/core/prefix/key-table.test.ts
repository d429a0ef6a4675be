import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KeyTable, LaneTable } from './key-table.js';
import { createRng } from '../rng.js';

test('key table: answers as a Set of the same keys would, through growth and clears', () => {
  const rnd = createRng(5);
  const t = new KeyTable(4);
  const s = new Set<number>();
  for (let round = 0; round < 3; round++) {
    // Keys from a small range (many repeats), 0 and the largest 30-bit key included.
    for (let i = 0; i < 5000; i++) {
      const k = i === 0 ? 0 : i === 1 ? 0x3fffffff : Math.floor(rnd() * 20_000);
      assert.equal(t.add(k), !s.has(k), `add ${k}`);
      s.add(k);
      assert.equal(t.size, s.size);
    }
    for (let k = 0; k < 20_000; k++) assert.equal(t.has(k), s.has(k), `has ${k}`);
    assert.equal(t.has(0x3fffffff), true);
    assert.ok(t.capacity >= 2 * t.size, 'at most half full');
    t.clear(round === 1 ? 8 : 5000);
    s.clear();
    assert.equal(t.size, 0);
    assert.equal(t.has(0), false);
  }
  // A clear for far fewer keys than it holds room for gives the memory back.
  t.add(1);
  const big = t.capacity;
  for (let k = 0; k < 50_000; k++) t.add(k);
  assert.ok(t.capacity > big);
  t.clear(100);
  assert.equal(t.capacity, 256);
});

test('lane table: each lane keeps its own generations of a key; one slot per key for both', () => {
  const t = new LaneTable(16);
  t.attach(0);
  t.attach(1);
  t.set(t.find(7), 7, 0);
  assert.equal(t.has(7, 0), true);
  assert.equal(t.has(7, 1), false, 'never touched by lane 1');
  t.set(t.find(7), 7, 1);
  assert.equal(t.occupied, 1, 'the second lane found the first lane slot');
  assert.equal(t.has(7, 1), true);
  // Lane 0 turns over twice: 7 is forgotten there (previous, then gone), still in lane 1.
  t.turn(0);
  assert.equal(t.has(7, 0), true, 'in the previous generation');
  assert.equal(t.isCurrent(t.find(7), 0), false);
  t.turn(0);
  assert.equal(t.has(7, 0), false);
  assert.equal(t.has(7, 1), true);
  assert.equal(t.isCurrent(t.find(7), 1), true);
  assert.equal(t.has(8, 0), false);
  assert.ok(t.find(8) < 0);
});

test('lane table: a rebuild drops the keys no attached lane remembers, and takes at most 40 bytes per live key', () => {
  const t = new LaneTable(16);
  t.attach(0);
  t.attach(1);
  // Lane 0 touches keys 0..999 in generations of 100; lane 1 only 0..99, in its first generation.
  let most = 0;
  for (let k = 0; k < 1000; k++) {
    if (k > 0 && k % 100 === 0) t.turn(0);
    t.set(t.find(k), k, 0);
    if (k < 100) t.set(t.find(k), k, 1);
    t.maintain();
    most = Math.max(most, t.live());
    assert.ok(t.bytes <= Math.max(32 * 8, 40 * (most + 1)), `${t.bytes} bytes, at most ${most} live`);
  }
  // Live: lane 0's current and previous hundred, and lane 1's 0..99.
  assert.equal(t.live(), 300);
  // Keys 100..799: forgotten by lane 0 and never in lane 1: dropped by the rebuilds.
  assert.ok(t.occupied < 1000, `${t.occupied} slots in use`);
  for (const k of [0, 99, 800, 999]) assert.ok(t.find(k) >= 0, `${k} kept`);
  assert.equal(t.has(150, 0), false);
  // Lane 1 detached: its keys are no longer live (the next rebuild drops them).
  assert.equal(t.detach(1), false);
  assert.equal(t.live(), 200);
  assert.equal(t.has(0, 1), false);
  assert.equal(t.detach(0), true, 'no lane left');
});

test('lane table: a lane attached again remembers nothing of before', () => {
  const t = new LaneTable(16);
  t.attach(0);
  t.attach(1);
  t.set(t.find(5), 5, 0);
  t.set(t.find(5), 5, 1);
  t.detach(0);
  t.attach(0);
  assert.equal(t.has(5, 0), false);
  assert.equal(t.has(5, 1), true, 'the other lane keeps it');
});

test('lane table: generations wrap (65,535 of them) without reviving a forgotten key', () => {
  const t = new LaneTable(16);
  t.attach(0);
  t.attach(1);
  t.set(t.find(1), 1, 1); // kept live by lane 1 throughout
  t.set(t.find(1), 1, 0);
  t.set(t.find(2), 2, 0);
  for (let g = 0; g < 3 * 65_536; g++) {
    t.turn(0);
    // Never again in lane 0: a count that came round to its old generation must not bring it back.
    assert.equal(t.has(1, 0), g === 0, `after ${g + 1} turnovers`);
    if (g % 4096 === 0) t.set(t.find(3), 3, 0);
  }
  assert.equal(t.has(1, 1), true);
  assert.equal(t.has(2, 0), false);
  assert.ok(t.find(2) < 0, 'dead: dropped by a rebuild');
});

test('lane table: maintain keeps room for the longest chain recorded, so recording one rebuilds nothing', () => {
  const t = new LaneTable(16);
  t.attach(0);
  let k = 0;
  for (let prompt = 0; prompt < 50; prompt++) {
    t.noteChain(300);
    t.maintain(); // an answer between two prompts
    const before = t.bytes;
    const slotsBefore = t.capacity;
    for (let j = 0; j < 300; j++, k++) t.set(t.find(k), k, 0);
    assert.equal(t.capacity, slotsBefore, `prompt ${prompt}: no rebuild while recording`);
    assert.equal(t.bytes, before);
  }
  assert.equal(t.live(), 15_000);
  assert.ok(t.bytes <= 40 * (15_000 + 300), `${t.bytes} bytes`);
});

test('lane table: inserts past half full rebuild at once, and membership holds through rebuilds', () => {
  const rnd = createRng(9);
  const t = new LaneTable(4);
  t.attach(0);
  const s = new Set<number>();
  for (let i = 0; i < 20_000; i++) {
    const k = Math.floor(rnd() * 0x3fffffff);
    t.set(t.find(k), k, 0);
    s.add(k);
    assert.ok(t.occupied * 2 <= t.capacity);
  }
  for (const k of s) assert.equal(t.has(k, 0), true);
  assert.equal(t.has(0x3fffffff, 0), s.has(0x3fffffff));
  assert.equal(t.live(), s.size);
});

test('lane table: touchRun puts and stops as find, isCurrent and set per key do, through rebuilds and turnovers', () => {
  const rnd = createRng(11);
  const a = new LaneTable(16);
  const b = new LaneTable(16);
  for (const t of [a, b]) {
    t.attach(0);
    t.attach(1);
  }
  let longWay = 0;
  for (let round = 0; round < 600; round++) {
    const lane: 0 | 1 = round % 3 === 0 ? 1 : 0;
    if (round % 7 === 0) for (const t of [a, b]) t.turn(lane);
    // Chains from a small range (repeats: keys already current stop a walk), rooms that cut them short.
    const keys = Int32Array.from({ length: 1 + Math.floor(rnd() * 60) }, () => Math.floor(rnd() * 3000));
    const room = Math.floor(rnd() * 80);
    let put = 0;
    let stopped = false;
    for (let j = keys.length - 1; j >= 0 && put < room; j--) {
      const at = a.find(keys[j]!);
      if (at >= 0 && a.isCurrent(at, lane)) {
        stopped = true;
        break;
      }
      a.set(at, keys[j]!, lane);
      put++;
    }
    // touchRun, and the key it leaves before an insert into a half-full table the long way (set rebuilds).
    let j = keys.length - 1;
    let put2 = 0;
    let stopped2 = false;
    while (j >= 0 && put2 < room) {
      const k = b.touchRun(keys, j, room - put2, lane);
      put2 += k;
      j -= k;
      if (b.stopped) {
        stopped2 = true;
        break;
      }
      if (j < 0 || put2 >= room) break;
      longWay++;
      b.set(b.find(keys[j]!), keys[j]!, lane);
      put2++;
      j--;
    }
    assert.equal(put2, put, `round ${round}: keys put`);
    assert.equal(stopped2, stopped, `round ${round}: stopped`);
    assert.equal(b.occupied, a.occupied);
    assert.equal(b.capacity, a.capacity);
    if (round % 50 === 49)
      for (let k = 0; k < 3000; k++) {
        assert.equal(b.has(k, 0), a.has(k, 0), `key ${k}, lane 0`);
        assert.equal(b.has(k, 1), a.has(k, 1), `key ${k}, lane 1`);
      }
  }
  assert.ok(longWay > 0, 'some walks met a half-full table');
});
