import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { BackendView, EngineMetrics } from '../core/types.js';
import { backendView } from '../core/testing.js';
import { availableReplicas } from './availability.js';

const view = (name: string, inFlight: number, metrics?: Partial<EngineMetrics>): BackendView =>
  backendView(name, 0, {
    inFlight,
    metrics: metrics ? { running: 0, waiting: 0, kvUsage: 0, at: 0, ...metrics } : undefined,
  });

describe('availableReplicas (SkyLB Algorithm 1, lines 3–8)', () => {
  const views = [
    view('idle', 0, { kvUsage: 0.1 }),
    view('full-kv', 5, { running: 5, kvUsage: 0.9 }),
    view('pending', 5, { running: 4, waiting: 1, kvUsage: 0.99 }),
    view('unscraped', 0),
  ];

  it('counts replicas with nothing pending (SP-P), whatever their KV usage', () => {
    assert.equal(availableReplicas(views, 0), 3);
  });

  it('lends peers only replicas below the KV usage given (lendKvBelow)', () => {
    // full-kv has no pending request but its cache space is its own users': not lent.
    assert.equal(availableReplicas(views, 0, 0.6), 2);
    assert.equal(availableReplicas(views, 0, 0.05), 1, 'a replica that never reported counts as empty');
    assert.equal(availableReplicas(views, 0, 1), 3);
  });
});
