import { test } from 'node:test';
import assert from 'node:assert/strict';
import { prefixDocuments, prefixRequests } from './workload.js';

const o = { seed: 3, documents: 4, docMin: 100, docMax: 200, suffix: 12, rate: 2, requests: 50 };

test('the prefix-heavy client: the same requests for a seed, each re-reading one document', () => {
  const docs = prefixDocuments(o);
  assert.equal(docs.length, 4);
  for (const d of docs) assert.ok(d.length >= 100 && d.length <= 230, String(d.length));
  assert.match(docs.join(''), /^[\x20-\x7e\n]*$/);
  const reqs = prefixRequests(o, docs);
  assert.equal(reqs.length, 50);
  assert.deepEqual(prefixRequests(o, prefixDocuments(o)), reqs);
  assert.notDeepEqual(prefixRequests({ ...o, seed: 4 }, prefixDocuments({ ...o, seed: 4 })), reqs);
  for (let i = 0; i < reqs.length; i++) {
    const q = reqs[i]!;
    assert.ok(q.prompt.startsWith(docs[q.doc]!));
    assert.ok(i === 0 || q.at >= reqs[i - 1]!.at);
  }
  // Every question is its own; every document is re-read.
  assert.equal(new Set(reqs.map((q) => q.prompt)).size, reqs.length);
  assert.equal(new Set(reqs.map((q) => q.doc)).size, docs.length);
});
