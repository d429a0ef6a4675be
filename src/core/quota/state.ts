import { UnknownModelError } from './errors.js';
import type { Hold } from './hold.js';
import { mergeLimits, validateLimits, type QuotaLimits } from './limits.js';
import type { WindowSlot } from './window.js';

/**
 * Accounting of one quota key (a model, or `backend/model`). Plain JSON on purpose: the memory
 * store keeps it in a Map, the Redis store keeps it in one key and runs the same functions on it.
 */
export interface ModelQuota {
  limits: QuotaLimits;
  /** Admitted leases not yet completed or reclaimed. */
  inFlight: number;
  /** WDRR deficit in tokens (wdrr.ts). */
  deficit: number;
  /** Rolling minute of admissions, oldest first (window.ts). */
  slots: WindowSlot[];
  /** Age-bonus reservation (hold.ts). */
  hold: Hold | null;
  /** EMA of completed lease lifetimes, for slot-release wait hints; null until one completes. */
  meanHoldMs: number | null;
  /** Removed from the configuration while leases were in flight: admits nothing, deleted at 0. */
  retired: boolean;
}

export interface QuotaState {
  /**
   * By key; read and write it through `modelQuota` / `setModelQuota` only: keys come from
   * clients, and `models["constructor"]` on a plain object finds Object.prototype's.
   */
  models: Record<string, ModelQuota>;
}

export function createQuotaState(limits: Record<string, QuotaLimits> = {}): QuotaState {
  const state: QuotaState = { models: Object.create(null) as Record<string, ModelQuota> };
  applyLimits(state, limits);
  return state;
}

/** The key's own entry, never an inherited property (a state decoded from JSON has a prototype). */
export function modelQuota(state: QuotaState, key: string): ModelQuota | undefined {
  return Object.hasOwn(state.models, key) ? state.models[key] : undefined;
}

/** Define, not assign: assigning `models["__proto__"]` would replace the object's prototype. */
function setModelQuota(state: QuotaState, key: string, m: ModelQuota): void {
  Object.defineProperty(state.models, key, {
    value: m,
    writable: true,
    enumerable: true,
    configurable: true,
  });
}

export function createModelQuota(limits: QuotaLimits): ModelQuota {
  return { limits, inFlight: 0, deficit: 0, slots: [], hold: null, meanHoldMs: null, retired: false };
}

/**
 * Make the state follow a whole configuration (startup, reload): new keys start fresh, existing
 * ones keep their in-flight count, window and deficit under the new limits, missing ones retire.
 * Validates everything before changing anything.
 */
export function applyLimits(state: QuotaState, limits: Record<string, QuotaLimits>): void {
  const valid = Object.entries(limits).map(([k, l]) => [k, validateLimits(l, `quotas.models.${k}`)] as const);
  for (const [k, l] of valid) {
    const m = modelQuota(state, k);
    if (m) {
      m.limits = l;
      m.retired = false;
    } else setModelQuota(state, k, createModelQuota(l));
  }
  for (const [k, m] of Object.entries(state.models)) {
    if (Object.hasOwn(limits, k)) continue;
    if (m.inFlight > 0) m.retired = true;
    else delete state.models[k];
  }
}

/** Change some limits of one key at run time (admin PATCH); in-flight accounting is kept. */
export function patchLimits(state: QuotaState, model: string, patch: Partial<QuotaLimits>): QuotaLimits {
  const m = modelQuota(state, model);
  if (!m || m.retired) throw new UnknownModelError(model);
  m.limits = mergeLimits(m.limits, patch, `quotas.models.${model}`);
  return m.limits;
}

/** Live (not retired) keys. */
export function liveModels(state: QuotaState): [string, ModelQuota][] {
  return Object.entries(state.models).filter(([, m]) => !m.retired);
}
