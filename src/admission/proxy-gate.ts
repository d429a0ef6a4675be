import type { Logger } from 'pino';
import { QuotaError, TooLargeError } from '../core/quota/index.js';
import { StoreUnavailableError } from '../state/quota-store.js';
import type { Admission } from './service.js';

/** Output tokens assumed when a request sets no max_tokens / num_predict. */
export const DEFAULT_OUTPUT_TOKENS = 256;

/**
 * Size of a proxied request in the quota's unit: prompt characters / 4 (the usual English
 * ratio; the router has no tokenizer) plus the output it may generate.
 */
export function estimateRequestTokens(promptText: string, maxTokens: number | undefined): number {
  return Math.max(1, Math.ceil(promptText.length / 4) + (maxTokens ?? DEFAULT_OUTPUT_TOKENS));
}

/** Header naming the /schedule lease a model call runs under (what `llmlb tasks run` sends). */
export const TASK_ID_HEADER = 'x-llmlb-task-id';

/**
 * A call made under a live /schedule lease for the same model was admitted already: gating it again
 * would count it twice. The lease is heartbeated (so it also proves it is live); an unknown,
 * finished or other-model id gets no pass and goes through the gate like any request.
 */
export async function leaseCovers(admission: Admission, taskId: string, model: string): Promise<boolean> {
  try {
    const lease = await admission.store.heartbeat(taskId);
    return lease.model === model;
  } catch {
    return false;
  }
}

/**
 * The client a gated request answers: whether it is gone, and its 'close' (the lease is released
 * then). An HTTP response (serve) or an ext_proc stream's life (src/epp) alike.
 */
export interface GateClient {
  readonly destroyed: boolean;
  once(event: 'close', listener: () => void): unknown;
  off(event: 'close', listener: () => void): unknown;
}

export type GateOutcome =
  | { kind: 'go' }
  | { kind: 'gone' }
  | { kind: 'fail'; status: number; message: string; code: string; retryAfterS?: number };

/**
 * Proxy-path admission: a request whose model has a quota takes a lease from the same store as
 * /schedule before it may be pushed. Over a target it waits here, in the router (not sent, not
 * rejected), and retries at the hinted time, up to `maxWaitMs`. The lease is heartbeated while
 * the response runs and released when it closes: success, error, or client abort alike.
 */
export async function passGate(
  admission: Admission,
  model: string,
  tokens: number,
  res: GateClient,
  clientGone: () => boolean,
  maxWaitMs: number,
  log: Logger,
): Promise<GateOutcome> {
  if (!admission.hasQuota(model)) return { kind: 'go' };
  const started = Date.now();
  // In llmlb_quota_gate_waiting from its first wait until it leaves the gate, whichever way.
  let waiting = false;
  try {
    const store = admission.store;
    for (;;) {
      let r;
      try {
        r = await store.acquire({ tokens, model });
      } catch (err) {
        if (err instanceof TooLargeError)
          return { kind: 'fail', status: 413, message: err.message, code: err.code };
        if (err instanceof QuotaError && err.code === 'unknown_model') {
          // A reload removed the model's quota between hasQuota and acquire: nothing to enforce.
          if (!admission.hasQuota(model)) return { kind: 'go' };
          // Configured here but absent from the shared state (another replica's configuration
          // differs): a configured model is never let through ungated.
          log.error({ model }, 'model has a quota in this configuration but none in the shared state');
          return {
            kind: 'fail',
            status: 503,
            message: `the quota of model '${model}' is missing from the shared state`,
            code: 'quota_state_missing',
            retryAfterS: 1,
          };
        }
        if (err instanceof StoreUnavailableError) {
          admission.noteGateOutage(model, err, admission.failOpen);
          if (admission.failOpen) return { kind: 'go' };
        } else log.error({ err, model }, 'quota store failed');
        return {
          kind: 'fail',
          status: 503,
          message: 'quota store unavailable',
          code: 'store_unavailable',
          retryAfterS: 1,
        };
      }
      if (r.kind === 'admitted') {
        admission.metrics.decisions.inc({ outcome: 'gate_admitted' });
        const id = r.lease.id;
        let released = false;
        const hb = setInterval(
          () => void store.heartbeat(id).catch(() => undefined),
          Math.max(100, admission.leaseTtlMs / 3),
        ).unref();
        const release = (): void => {
          if (released) return;
          released = true;
          clearInterval(hb);
          store.complete(id).catch((err: unknown) => log.warn({ err, id }, 'quota lease release failed'));
        };
        if (clientGone() || res.destroyed) {
          release();
          return { kind: 'gone' };
        }
        res.once('close', release);
        return { kind: 'go' };
      }
      admission.metrics.decisions.inc({ outcome: 'gate_wait' });
      if (!waiting) admission.metrics.gateWaiting.inc({ model });
      waiting = true;
      if (Date.now() - started + r.waitForMs > maxWaitMs) {
        return {
          kind: 'fail',
          status: 503,
          message: `model '${model}' is over its quota for longer than the queue wait limit`,
          code: 'quota_wait_timeout',
          retryAfterS: Math.ceil(r.waitForMs / 1000),
        };
      }
      if (!(await sleepUnlessClosed(r.waitForMs, res))) return { kind: 'gone' };
      if (clientGone()) return { kind: 'gone' };
    }
  } finally {
    if (waiting) admission.metrics.gateWaiting.dec({ model });
  }
}

/** Sleep `ms`, or resolve false as soon as the client goes away. */
function sleepUnlessClosed(ms: number, res: GateClient): Promise<boolean> {
  return new Promise((resolve) => {
    const onClose = (): void => {
      clearTimeout(t);
      resolve(false);
    };
    const t = setTimeout(() => {
      res.off('close', onClose);
      resolve(true);
    }, ms);
    res.once('close', onClose);
  });
}
