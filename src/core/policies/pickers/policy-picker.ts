import type { BackendView, Policy } from '../../types.js';
import type { Picker } from '../plugin.js';

/**
 * A whole-decision policy (estimated-wait, ollama-router, pinned) as a profile's picker: it picks
 * from the filtered candidates on its own estimates and ignores the profile's scores. This keeps
 * those policies exactly as measured while every policy still runs as a profile.
 */
const NONE: readonly BackendView[] = Object.freeze([]);

export function policyPicker(policy: Policy): Picker {
  // The answer, reused: a profile reads it before its next pick (a pick is made per request).
  const one: BackendView[] = [];
  return {
    kind: 'picker',
    type: `${policy.name}-picker`,
    name: policy.name,
    pick(req, candidates, _scores, now) {
      const b = policy.pick(req, candidates, now);
      if (b) one[0] = b;
      return b ? one : NONE;
    },
    ...(policy.onDispatch ? { onDispatch: policy.onDispatch.bind(policy) } : {}),
    ...(policy.onComplete ? { onComplete: policy.onComplete.bind(policy) } : {}),
    ...(policy.onBackendRemoved ? { onBackendRemoved: policy.onBackendRemoved.bind(policy) } : {}),
    ...(policy.describe ? { describe: policy.describe.bind(policy) } : {}),
    ...(policy.requestClass ? { requestClass: policy.requestClass.bind(policy) } : {}),
    ...(policy.explainLast ? { explainLast: policy.explainLast.bind(policy) } : {}),
    ...(policy.heldByLoad ? { heldByLoad: policy.heldByLoad.bind(policy) } : {}),
    ...(policy.heldUntilChange ? { heldUntilChange: policy.heldUntilChange.bind(policy) } : {}),
    ...(policy.holdsIgnoreMetrics ? { holdsIgnoreMetrics: true } : {}),
    // A policy that reads no metrics never holds either (Policy.readsMetrics).
    ...(policy.readsMetrics === false ? { neverHolds: true, readsMetrics: false } : {}),
    ...(policy.fitGate ? { fitGate: policy.fitGate } : {}),
    ...(policy.responseRatio ? { responseRatio: policy.responseRatio } : {}),
  };
}
