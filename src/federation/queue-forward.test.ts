import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RequestInfo } from '../core/types.js';
import { Federation } from './federation.js';
import { QueuedForwards, type PeerRoute } from './queue-forward.js';

const req = (id: string): RequestInfo => ({ id, model: 'm', api: 'openai', arrivedAt: 0, promptText: id });

function setup(tau: number) {
  const fed = new Federation({
    region: 'us',
    peers: [{ name: 'eu', url: 'http://eu', region: 'eu' }],
    selection: 'trie',
    tau,
  });
  let local = false;
  const q = new QueuedForwards(
    fed,
    () => local,
    () => 0,
  );
  const taken: string[] = [];
  const still = new Set<string>();
  const add = (id: string): void => {
    still.add(id);
    q.add(req(id), (d: PeerRoute) => {
      if (!still.delete(id)) return false;
      taken.push(`${id}->${d.peer}`);
      return true;
    });
  };
  return { fed, q, taken, still, add, setLocal: (v: boolean) => (local = v) };
}

describe('QueuedForwards (Algorithm 1 at the queue head)', () => {
  it('forwards the oldest waiting requests as far as the peer has room (τ), and only once', () => {
    const { fed, q, taken, add } = setup(1);
    for (const id of ['a', 'b', 'c']) add(id);
    assert.equal(q.drain(), 0, 'no peer status yet: all wait');
    fed.setStatus('eu', { region: 'eu', availableReplicas: 1, queueLength: 0 }, 0);
    // τ = 1: queue 0 + 0 sent, then 0 + 1 sent are within it; the third would be over.
    assert.equal(q.drain(), 2);
    assert.deepEqual(taken, ['a->eu', 'b->eu']);
    assert.equal(q.size, 1);
    assert.equal(q.drain(), 0, 'what was sent since the status counts as queued there');
    fed.setStatus('eu', { region: 'eu', availableReplicas: 1, queueLength: 0 }, 1);
    assert.equal(q.drain(), 1);
    assert.deepEqual(taken, ['a->eu', 'b->eu', 'c->eu']);
    assert.equal(q.forwarded, 3);
    assert.equal(q.size, 0);
  });

  it('keeps the queue here while a local replica is available', () => {
    const { fed, q, taken, add, setLocal } = setup(2);
    fed.setStatus('eu', { region: 'eu', availableReplicas: 1, queueLength: 0 }, 0);
    add('a');
    setLocal(true);
    assert.equal(q.drain(), 0);
    setLocal(false);
    assert.equal(q.drain(), 1);
    assert.deepEqual(taken, ['a->eu']);
  });

  it('skips (and forgets) requests that no longer wait, without counting them at the peer', () => {
    const { fed, q, taken, still, add } = setup(0);
    add('gone');
    add('b');
    still.delete('gone'); // dispatched or its client left, not yet removed
    add('removed');
    q.remove('removed');
    fed.setStatus('eu', { region: 'eu', availableReplicas: 1, queueLength: 0 }, 0);
    // τ = 0 lets exactly one through: 'gone' must not have used it.
    assert.equal(q.drain(), 1);
    assert.deepEqual(taken, ['b->eu']);
    assert.equal(q.size, 0);
    assert.equal(fed.describe(0)[0]!.forwarded, 1);
  });

  it('a request queued again goes to the back', () => {
    const { fed, q, taken, add } = setup(0);
    add('a');
    add('b');
    add('a');
    fed.setStatus('eu', { region: 'eu', availableReplicas: 1, queueLength: 0 }, 0);
    q.drain();
    assert.deepEqual(taken, ['b->eu']);
  });
});
