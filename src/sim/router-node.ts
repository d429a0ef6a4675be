/**
 * A router node of a simulated run (issue #31: one simulator): the scheduling core the live
 * router runs, over the backends of the fleet it pushes to. One router is the one-node case.
 */
import { Scheduler } from '../core/scheduler.js';
import type { Policy } from '../core/types.js';
import type { ScenarioBackend } from '../scenario/types.js';

/** A scheduler for `policy` over `backends` (in fleet order), as the live router registers them. */
export function routerScheduler(policy: Policy, backends: readonly ScenarioBackend[]): Scheduler {
  const scheduler = new Scheduler({ policy });
  for (const b of backends) {
    scheduler.addBackend({
      name: b.name,
      api: 'ollama',
      models: b.models,
      adapters: b.adapters,
      maxConcurrency: b.maxConcurrency,
      weight: b.weight,
      region: b.region,
    });
  }
  return scheduler;
}
