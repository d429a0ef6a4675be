import { isHold } from '../../../types.js';
import type { BackendView, Policy } from '../../../types.js';
import type { Picker } from '../../framework/plugin.js';

/**
 * A whole-decision policy (estimated-wait, ollama-router, pinned) as a profile's picker: it picks
 * from the filtered candidates on its own estimates and ignores the profile's scores. This keeps
 * those policies exactly as measured while every policy still runs as a profile. Its holds pass
 * through as values and its traits and queue order as they are: nothing to forward by hand but
 * the lifecycle hooks.
 */
export function policyPicker(policy: Policy): Picker {
  // The answer, reused: a profile reads it before its next pick (a pick is made per request).
  const one: BackendView[] = [];
  return {
    kind: 'picker',
    type: `${policy.name}-picker`,
    name: policy.name,
    traits: policy.traits,
    queueOrder: policy.queueOrder,
    pick(req, candidates, _scores, now) {
      const b = policy.pick(req, candidates, now);
      if (isHold(b)) return b;
      one[0] = b;
      return one;
    },
    ...(policy.onDispatch ? { onDispatch: policy.onDispatch.bind(policy) } : {}),
    ...(policy.onComplete ? { onComplete: policy.onComplete.bind(policy) } : {}),
    ...(policy.onBackendRemoved ? { onBackendRemoved: policy.onBackendRemoved.bind(policy) } : {}),
    ...(policy.describe ? { describe: policy.describe.bind(policy) } : {}),
    ...(policy.requestClass ? { requestClass: policy.requestClass.bind(policy) } : {}),
    ...(policy.explainLast ? { explainLast: policy.explainLast.bind(policy) } : {}),
  };
}
