/** Tunables of the quota core. All in milliseconds or tokens; defaults below. */
export interface QuotaOptions {
  /** Width of a rolling-window slot; capacity returns and waits align on these boundaries. */
  tickMs: number;
  /** WDRR quantum in tokens for weight 1 (a model of weight w gets w·quantum a round). */
  quantumTokens: number;
  /** A request refused for tokens this long gets the model's remaining budget reserved (age bonus). */
  ageBonusMs: number;
  /** A reservation lives this long past the wait its holder was told, then is dropped (holder gone). */
  holdGraceMs: number;
  /** Lease lifetime without a heartbeat. */
  leaseTtlMs: number;
  /** Retry hint when a model is at its concurrency cap and no lease lifetime was observed yet. */
  slotRetryMs: number;
  /** Floor of every wait hint. */
  minWaitMs: number;
}

export const DEFAULT_QUOTA_OPTIONS: Readonly<QuotaOptions> = Object.freeze({
  tickMs: 100,
  quantumTokens: 1000,
  ageBonusMs: 2000,
  holdGraceMs: 5000,
  leaseTtlMs: 30_000,
  slotRetryMs: 250,
  minWaitMs: 50,
});

export function resolveOptions(o: Partial<QuotaOptions> = {}): QuotaOptions {
  const r = { ...DEFAULT_QUOTA_OPTIONS };
  for (const k of Object.keys(r) as (keyof QuotaOptions)[]) {
    const v = o[k];
    if (v !== undefined) {
      if (!Number.isFinite(v) || v <= 0)
        throw new RangeError(`quota option ${k} must be a finite number > 0`);
      r[k] = v;
    }
  }
  return r;
}
