/**
 * Quota core (pure: no I/O, no clock, no randomness of its own; `now` and `random` are passed in).
 *
 * Per key (a model, or any opaque key such as `backend/model`):
 *   - WDRR deficits with weights (wdrr.ts), closed-form rounds; picks the model when none is pinned;
 *   - a rolling-minute budget of tokens and of requests (window.ts): never more than the target in
 *     any 60 s window; capacity returns at tick boundaries;
 *   - a concurrency cap; an age-bonus reservation so large requests don't starve (hold.ts);
 *   - leases with a TTL (lease.ts): complete frees the slot, expiry also refunds tokens and deficit;
 *   - wait hints aligned to ticks, jittered ±10 %, ≥ 50 ms (wait.ts); advice (advice.ts).
 *
 * Two ways in:
 *   - `QuotaBook`: everything in one object (what the in-memory store uses);
 *   - the functions on a JSON-safe `QuotaState` (`tryAdmit`, `releaseLease`, `reclaimLease`,
 *     `applyLimits`, `patchLimits`, `snapshotState`), for stores that keep state elsewhere (Redis).
 */
export { AdviceWindow, type Advice } from './advice.js';
export { tryAdmit, validateTokens, type AdmitRequest, type AdmitResult, type WaitReason } from './admit.js';
export { QuotaBook } from './book.js';
export {
  LeaseNotFoundError,
  QuotaError,
  QuotaInputError,
  TooLargeError,
  UnknownModelError,
} from './errors.js';
export type { Hold } from './hold.js';
export { LeaseTable, reclaimLease, releaseLease, type Lease } from './lease.js';
export { mergeLimits, validateLimits, type QuotaLimits } from './limits.js';
export { DEFAULT_QUOTA_OPTIONS, resolveOptions, type QuotaOptions } from './options.js';
export { capacityOf, snapshotState, type QuotaSnapshot } from './snapshot.js';
export {
  applyLimits,
  createModelQuota,
  createQuotaState,
  liveModels,
  patchLimits,
  type ModelQuota,
  type QuotaState,
} from './state.js';
export { WINDOW_MS, type WindowSlot } from './window.js';
