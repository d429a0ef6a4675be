import { test } from 'node:test';
import assert from 'node:assert/strict';
import { replicaFor } from './replicate.js';
import { WaitEstimator } from './estimator.js';
import { parseEstimatedWaitParams } from './params.js';
import { backendView, distinctText, requestInfo } from '../../../testing.js';

/**
 * a has room and holds nothing of the prompt (a 2,000-token miss); b holds
 * it and is full: 2 slots, 4 in flight of 2,000 tokens each; c has room, or with `cQueues`
 * queues past its slots too. The pick chose b (queueForCache). Returns where replicaFor sends it.
 */
function replicate(params: Record<string, unknown>, cQueues = false): string {
  const p = parseEstimatedWaitParams(params);
  const est = new WaitEstimator(p);
  const views = [backendView('a', 0), backendView('b', 1), backendView('c', 2)];
  est.bind(views);
  for (let k = 0; k < 4; k++) est.onDispatch(requestInfo(`b${k}`, distinctText(`b${k}`, 8000)), views[1]!, 0);
  if (cQueues)
    for (let k = 0; k < 3; k++)
      est.onDispatch(requestInfo(`c${k}`, distinctText(`c${k}`, 400)), views[2]!, 0);
  est.bind(views);
  for (let i = 0; i < 3; i++) est.candCost[i] = est.candState[i]!;
  est.candSlots.set([64, 2, cQueues ? 2 : 64]);
  est.uncached.set([2000, 100, 2000]);
  // As priced: b cheapest (the miss price), a the cheapest engine with room.
  const costs = Float64Array.from([12, 9, 13]);
  const open = Uint8Array.from([1, 0, cQueues ? 0 : 1]);
  return views[replicaFor(est, p, open, 3, costs, 1, 100)]!.name;
}

test('replicateHot sends a re-read off a full holder whose queue outlasts a miss elsewhere', () => {
  // Off (the default): queued into its holder.
  assert.equal(replicate({}), 'b');
  // The holder's first token comes several times later than a's: copied to a, the cheapest engine with room.
  assert.equal(replicate({ replicateHot: 2 }), 'a');
  // Not when the holder's wait is within the factor of the miss.
  assert.equal(replicate({ replicateHot: 10 }), 'b');
  // Not while another engine queues past its slots: the fleet is saturated, not one prefix hot.
  assert.equal(replicate({ replicateHot: 2 }, true), 'b');
});
