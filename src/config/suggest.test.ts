import { test } from 'node:test';
import assert from 'node:assert/strict';
import { z } from 'zod';
import { closestKey, didYouMean, editDistance, knownKeysAt } from './suggest.js';

test('edit distance counts an adjacent swap as one edit', () => {
  assert.equal(editDistance('port', 'port'), 0);
  assert.equal(editDistance('prot', 'port'), 1);
  assert.equal(editDistance('modles', 'models'), 1);
  assert.equal(editDistance('polcy', 'policy'), 1);
  assert.equal(editDistance('', 'abc'), 3);
  assert.equal(editDistance('kitten', 'sitting'), 3);
});

test('the closest key only when a typo could explain it', () => {
  const known = ['port', 'host', 'policy', 'backends', 'maxConcurrency'];
  assert.equal(closestKey('prot', known), 'port');
  assert.equal(closestKey('backend', known), 'backends');
  assert.equal(closestKey('maxconcurency', known), 'maxConcurrency');
  assert.equal(closestKey('bogus', known), undefined);
  assert.equal(closestKey('x', known), undefined);
  assert.equal(closestKey('prot', []), undefined);
});

test('known keys are found through optional, default, arrays, records and unions', () => {
  const schema = z.strictObject({
    server: z.strictObject({ port: z.number(), host: z.string() }).optional(),
    backends: z.array(z.strictObject({ name: z.string(), models: z.array(z.string()) })).default([]),
    routes: z.record(z.string(), z.strictObject({ target: z.string() })),
    policy: z.union([z.string(), z.strictObject({ name: z.string(), params: z.object({}) })]),
  });
  assert.deepEqual([...knownKeysAt(schema, [])], ['server', 'backends', 'routes', 'policy']);
  assert.deepEqual([...knownKeysAt(schema, ['server'])], ['port', 'host']);
  assert.deepEqual([...knownKeysAt(schema, ['backends', 3])], ['name', 'models']);
  assert.deepEqual([...knownKeysAt(schema, ['routes', 'any'])], ['target']);
  assert.deepEqual([...knownKeysAt(schema, ['policy'])], ['name', 'params']);
  assert.deepEqual([...knownKeysAt(schema, ['nope'])], []);
  assert.equal(didYouMean(schema, ['backends', 0], 'modles'), '; did you mean `models`?');
  assert.equal(didYouMean(schema, [], 'zzz'), '');
});
