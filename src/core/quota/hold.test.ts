import { test } from 'node:test';
import assert from 'node:assert/strict';
import { noteAdmission, noteTokenRefusal, reservedFor } from './hold.js';

test('a hold reserves tokens from smaller requests only once it has aged', () => {
  const h = noteTokenRefusal(null, 800, 0, 1000, 5000);
  assert.equal(reservedFor(h, 100, 1999, 2000), 0, 'young hold: no reservation');
  assert.equal(reservedFor(h, 100, 2000, 2000), 800);
  assert.equal(reservedFor(h, 800, 2500, 2000), 0, 'the holder itself is not held back');
  assert.equal(reservedFor(h, 100, 6000, 2000), 0, 'expired (holder stopped retrying)');
});

test('the holder retrying extends it; larger refusals grow it, smaller ones do not; a large admission ends it', () => {
  let h = noteTokenRefusal(null, 800, 0, 1000, 5000);
  h = noteTokenRefusal(h, 100, 500, 100, 5000);
  assert.equal(h.tokens, 800);
  h = noteTokenRefusal(h, 800, 5000, 2000, 5000);
  assert.equal(h.since, 0);
  assert.equal(h.expiresAt, 12_000);
  assert.notEqual(noteAdmission(h, 100, 6000), null);
  const g = noteTokenRefusal(h, 900, 5500, 100, 5000);
  assert.deepEqual([g.tokens, g.since], [900, 0]);
  assert.equal(noteAdmission(h, 900, 6000), null);
});
