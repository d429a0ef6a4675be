/**
 * Typed errors of the quota core. Hosts map them to their own wire format (HTTP 400/404/422);
 * every one is thrown before any state is touched, so a failed call changes nothing.
 */
export class QuotaError extends Error {
  override readonly name: string = 'QuotaError';
  constructor(
    message: string,
    /** Stable machine-readable code, used by HTTP hosts as the error code. */
    readonly code: 'invalid_input' | 'unknown_model' | 'too_large' | 'lease_not_found',
  ) {
    super(message);
  }
}

/** A field is missing, not a number, negative, fractional where an integer is needed, … */
export class QuotaInputError extends QuotaError {
  override readonly name = 'QuotaInputError';
  constructor(message: string) {
    super(message, 'invalid_input');
  }
}

/** The pinned model has no quota configured (or it was removed by a reload). */
export class UnknownModelError extends QuotaError {
  override readonly name = 'UnknownModelError';
  /** `model` undefined: the caller let the router pick, and no model has a quota. */
  constructor(readonly model: string | undefined) {
    super(
      model === undefined ? 'no model quotas are configured' : `no quota is configured for model "${model}"`,
      'unknown_model',
    );
  }
}

/** The request can never be admitted: it needs more tokens than any candidate's per-minute target. */
export class TooLargeError extends QuotaError {
  override readonly name = 'TooLargeError';
  constructor(
    readonly tokens: number,
    readonly largestTokensPerMinute: number,
  ) {
    super(
      `estimated_tokens ${tokens} exceeds the tokensPerMinute target (${largestTokensPerMinute}) of every candidate model`,
      'too_large',
    );
  }
}

/** Unknown lease id, or one already completed or reclaimed: completing twice never releases twice. */
export class LeaseNotFoundError extends QuotaError {
  override readonly name = 'LeaseNotFoundError';
  constructor(readonly leaseId: string) {
    super(
      `task ${leaseId} is unknown, already completed, or its lease expired and was reclaimed`,
      'lease_not_found',
    );
  }
}
