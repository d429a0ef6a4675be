import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  msUntilFits,
  pruneWindow,
  recordAdmission,
  refundTokens,
  windowUsage,
  type WindowSlot,
} from './window.js';

const TICK = 100;

test('admissions in one tick share a slot; usage sums slots', () => {
  const s: WindowSlot[] = [];
  assert.equal(recordAdmission(s, 1010, TICK, 5), 1000);
  assert.equal(recordAdmission(s, 1099, TICK, 7), 1000);
  assert.equal(recordAdmission(s, 1100, TICK, 1), 1100);
  assert.deepEqual(windowUsage(s), { tokens: 13, requests: 3 });
  assert.equal(s.length, 2);
});

test('a slot counts until its whole tick has left the last 60 s', () => {
  const s: WindowSlot[] = [];
  recordAdmission(s, 1050, TICK, 10);
  pruneWindow(s, 61_099, TICK);
  assert.equal(windowUsage(s).tokens, 10, 'tick [1000,1100) still overlaps (1099, 61099]');
  pruneWindow(s, 61_100, TICK);
  assert.equal(windowUsage(s).tokens, 0);
});

test('msUntilFits: 0 when it fits, the expiry of the slot that makes room otherwise, Infinity if never', () => {
  const s: WindowSlot[] = [];
  recordAdmission(s, 0, TICK, 40);
  recordAdmission(s, 500, TICK, 40);
  assert.equal(msUntilFits(s, 'tokens', 20, 100, 1000, TICK), 0);
  // needs 30: the first slot ([0,100)) must leave: at 60_100
  assert.equal(msUntilFits(s, 'tokens', 30, 100, 1000, TICK), 59_100);
  // needs 70: both must leave; the second slot [500,600) leaves at 60_600
  assert.equal(msUntilFits(s, 'tokens', 70, 100, 1000, TICK), 59_600);
  assert.equal(msUntilFits(s, 'tokens', 101, 100, 1000, TICK), Infinity);
  assert.equal(msUntilFits(s, 'requests', 1, 2, 1000, TICK), 59_100);
});

test('refund gives back tokens of a slot still counted, never below zero; requests stay', () => {
  const s: WindowSlot[] = [];
  const t = recordAdmission(s, 250, TICK, 30);
  refundTokens(s, t, 30);
  refundTokens(s, t, 30);
  assert.deepEqual(windowUsage(s), { tokens: 0, requests: 1 });
  refundTokens(s, 999_900, 5); // slot long gone: no effect, no throw
});

test('a clock that goes backwards charges the newest slot, not an older one', () => {
  const s: WindowSlot[] = [];
  recordAdmission(s, 5000, TICK, 1);
  assert.equal(recordAdmission(s, 4000, TICK, 2), 5000);
  assert.equal(s.length, 1);
});
