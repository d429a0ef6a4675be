import { QuotaInputError } from './errors.js';

/** Per-model (or per any opaque key, e.g. `backend/model`) traffic targets. */
export interface QuotaLimits {
  /** WDRR share when the router picks the model (`/schedule` without `model`). > 0. */
  weight: number;
  /** Hard cap on admitted, not yet completed requests. Integer ≥ 0; 0 pauses the model. */
  maxConcurrent: number;
  /** Most estimated tokens admitted in any 60 s window. Integer ≥ 1. */
  tokensPerMinute: number;
  /** Most requests admitted in any 60 s window. Integer ≥ 1. */
  requestsPerMinute: number;
}

function check(name: string, v: unknown, integer: boolean, min: number): number {
  if (typeof v !== 'number' || !Number.isFinite(v))
    throw new QuotaInputError(`${name} must be a finite number`);
  if (integer && !Number.isInteger(v)) throw new QuotaInputError(`${name} must be an integer`);
  if (v < min) throw new QuotaInputError(`${name} must be ≥ ${min}`);
  return v;
}

/** Validate a full set of limits (throws QuotaInputError naming the field). */
export function validateLimits(l: QuotaLimits, where = 'quota'): QuotaLimits {
  if (typeof l.weight !== 'number' || !(l.weight > 0) || !Number.isFinite(l.weight)) {
    throw new QuotaInputError(`${where}.weight must be a finite number > 0`);
  }
  check(`${where}.maxConcurrent`, l.maxConcurrent, true, 0);
  check(`${where}.tokensPerMinute`, l.tokensPerMinute, true, 1);
  check(`${where}.requestsPerMinute`, l.requestsPerMinute, true, 1);
  return {
    weight: l.weight,
    maxConcurrent: l.maxConcurrent,
    tokensPerMinute: l.tokensPerMinute,
    requestsPerMinute: l.requestsPerMinute,
  };
}

/** Apply a partial change (admin PATCH) and validate the result; `base` is not modified. */
export function mergeLimits(base: QuotaLimits, patch: Partial<QuotaLimits>, where = 'quota'): QuotaLimits {
  return validateLimits({ ...base, ...stripUndefined(patch) }, where);
}

function stripUndefined(p: Partial<QuotaLimits>): Partial<QuotaLimits> {
  const out: Partial<QuotaLimits> = {};
  for (const k of ['weight', 'maxConcurrent', 'tokensPerMinute', 'requestsPerMinute'] as const) {
    if (p[k] !== undefined) out[k] = p[k];
  }
  return out;
}
