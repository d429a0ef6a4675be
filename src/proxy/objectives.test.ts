import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ObjectiveTable } from './objectives.js';

test('ObjectiveTable: config priorities, discovered ones merged over them, rebuilt on either change', () => {
  const t = new ObjectiveTable();
  const cfg = { critical: { priority: 10 }, batch: { priority: -1 } };
  assert.equal(t.priority(cfg, 'critical'), 10);
  assert.equal(t.priority(cfg, ' batch '), -1);
  assert.equal(t.priority(cfg, 'toString'), undefined); // no prototype lookups
  assert.equal(t.priority(cfg, undefined), undefined);
  assert.equal(t.priority(cfg, ['critical']), undefined);
  assert.equal(t.priority(undefined, 'critical'), undefined);
  t.setDiscovered(
    new Map([
      ['critical', 3],
      ['live', 7],
      ['__proto__', 5],
    ]),
  );
  assert.equal(t.priority(cfg, 'critical'), 3, 'the discovered objective wins');
  assert.equal(t.priority(cfg, 'batch'), -1, 'the config stays the fallback');
  assert.equal(t.priority(cfg, 'live'), 7);
  assert.equal(t.priority(cfg, '__proto__'), 5);
  assert.equal(t.priority(undefined, 'live'), 7, 'discovered ones without any config table');
  const reloaded = { batch: { priority: -2 } };
  assert.equal(t.priority(reloaded, 'batch'), -2, 'a reloaded config table is read');
  assert.equal(t.priority(reloaded, 'critical'), 3);
  t.setDiscovered(new Map());
  assert.equal(t.priority(reloaded, 'critical'), undefined, 'a deleted objective is gone');
  assert.deepEqual(
    [...t.entries(cfg)],
    [
      ['critical', 10],
      ['batch', -1],
    ],
  );
});
