import { QuotaInputError, TooLargeError, UnknownModelError } from './errors.js';
import { activeHold, noteAdmission, noteTokenRefusal, reservedFor } from './hold.js';
import type { Lease } from './lease.js';
import type { QuotaOptions } from './options.js';
import { liveModels, modelQuota, type ModelQuota, type QuotaState } from './state.js';
import { shapeWait, slotReleaseMs } from './wait.js';
import { pickWdrr } from './wdrr.js';
import { msUntilFits, pruneWindow, recordAdmission } from './window.js';

export interface AdmitRequest {
  /** Estimated tokens of the request (prompt + expected output). Integer ≥ 1. */
  tokens: number;
  /** Pin a model; omitted → WDRR picks among models with capacity. */
  model?: string;
}

/** Which limit kept the best candidate out. */
export type WaitReason = 'concurrency' | 'requests' | 'tokens';

export type AdmitResult =
  | { kind: 'admitted'; lease: Lease }
  | {
      kind: 'wait';
      /** Shaped hint: jittered, aligned to a tick, ≥ minWaitMs. */
      waitForMs: number;
      /** Unshaped ms until the best candidate has capacity. */
      rawWaitMs: number;
      model: string;
      reason: WaitReason;
    };

/** Throws QuotaInputError unless `tokens` is an integer ≥ 1. */
export function validateTokens(tokens: unknown): number {
  if (typeof tokens !== 'number' || !Number.isInteger(tokens) || tokens < 1) {
    throw new QuotaInputError('estimated_tokens must be an integer ≥ 1');
  }
  return tokens;
}

interface Blocked {
  name: string;
  m: ModelQuota;
  wait: number;
  reason: WaitReason;
  tokenWait: number;
}

function blockage(m: ModelQuota, tokens: number, now: number, o: QuotaOptions): Omit<Blocked, 'name' | 'm'> {
  const l = m.limits;
  const slot =
    m.inFlight < l.maxConcurrent
      ? 0
      : l.maxConcurrent === 0
        ? o.slotRetryMs
        : slotReleaseMs(m.meanHoldMs, m.inFlight, o.slotRetryMs);
  const reqs = msUntilFits(m.slots, 'requests', 1, l.requestsPerMinute, now, o.tickMs);
  // A hold larger than the (lowered) target can never be met: it reserves nothing.
  const held = reservedFor(m.hold, tokens, now, o.ageBonusMs);
  const reserve = held > l.tokensPerMinute ? 0 : held;
  let tok = msUntilFits(m.slots, 'tokens', tokens + reserve, l.tokensPerMinute, now, o.tickMs);
  if (tok === Infinity) {
    // Only the reservation makes it impossible: the holder goes first, then this one.
    const h = activeHold(m.hold, now);
    const forHolder = msUntilFits(m.slots, 'tokens', reserve, l.tokensPerMinute, now, o.tickMs);
    tok = Math.max(forHolder, o.tickMs, h ? Math.min(h.expiresAt - now, o.slotRetryMs) : 0);
  }
  const wait = Math.max(slot, reqs, tok);
  const reason: WaitReason =
    wait === slot && slot > 0 ? 'concurrency' : wait === reqs && reqs > 0 ? 'requests' : 'tokens';
  return { wait, reason, tokenWait: tok };
}

/**
 * Admit a request now or say how long to wait. On admission: the WDRR winner pays its deficit,
 * one slot, and `tokens` + one request in the rolling window; the lease is returned for the host
 * to keep. On refusal nothing is charged; only the age-bonus hold may open (hold.ts).
 * Throws (before any change) QuotaInputError, UnknownModelError, TooLargeError.
 */
export function tryAdmit(
  state: QuotaState,
  req: AdmitRequest,
  leaseId: string,
  now: number,
  o: QuotaOptions,
  random: () => number,
): AdmitResult {
  const tokens = validateTokens(req.tokens);
  let cands: [string, ModelQuota][];
  if (req.model !== undefined) {
    const m = modelQuota(state, req.model);
    if (!m || m.retired) throw new UnknownModelError(req.model);
    cands = [[req.model, m]];
  } else {
    cands = liveModels(state);
    if (cands.length === 0) throw new UnknownModelError(undefined);
  }
  const possible = cands.filter(([, m]) => tokens <= m.limits.tokensPerMinute);
  if (possible.length === 0) {
    throw new TooLargeError(tokens, Math.max(...cands.map(([, m]) => m.limits.tokensPerMinute)));
  }

  const blocked: Blocked[] = [];
  const open: [string, ModelQuota][] = [];
  for (const [name, m] of possible) {
    pruneWindow(m.slots, now, o.tickMs);
    const b = blockage(m, tokens, now, o);
    if (b.wait <= 0) open.push([name, m]);
    else blocked.push({ name, m, ...b });
  }

  if (open.length > 0) {
    const pick = pickWdrr(
      open.map(([name, m]) => ({ name, weight: m.limits.weight, deficit: m.deficit })),
      tokens,
      o.quantumTokens,
    )!;
    if (pick.rounds > 0)
      for (const [, m] of open) m.deficit += pick.rounds * m.limits.weight * o.quantumTokens;
    const [name, m] = open[pick.index]!;
    m.deficit -= tokens;
    m.inFlight += 1;
    const tick = recordAdmission(m.slots, now, o.tickMs, tokens);
    m.hold = noteAdmission(m.hold, tokens, now);
    return {
      kind: 'admitted',
      lease: { id: leaseId, model: name, tokens, admittedAt: now, expiresAt: now + o.leaseTtlMs, tick },
    };
  }

  let best = blocked[0]!;
  for (const b of blocked) if (b.wait < best.wait || (b.wait === best.wait && b.name < best.name)) best = b;
  // Every wait above is finite by construction; the guard keeps a hint a number regardless.
  const base = Number.isFinite(best.wait) ? best.wait : o.slotRetryMs;
  const waitForMs = shapeWait(base, now, o.tickMs, o.minWaitMs, random);
  if (best.tokenWait > 0) best.m.hold = noteTokenRefusal(best.m.hold, tokens, now, waitForMs, o.holdGraceMs);
  return { kind: 'wait', waitForMs, rawWaitMs: base, model: best.name, reason: best.reason };
}
