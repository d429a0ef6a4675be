import { z } from 'zod';
import { finiteOr } from '../../estimators/guard.js';
import { HOLD } from '../../types.js';
import type { BackendView, Policy, PolicyContext, RequestInfo } from '../../types.js';
import { parseParams } from '../framework/params.js';

/**
 * OllamaRouter (OllamaRouter), Algorithm 1 and §4.3, kept faithful: it is the reference the
 * `estimated-wait` policy is measured against. Per backend: q_i = characters of the prompts in
 * flight (whitespace runs collapsed), t̂_i = EMA time per token, γ_i ∈ [0,2] = queue weight; one
 * global token factor f. Ŵ(i) = (γ_i·q_i·f + T̂)·t̂_i with T̂ = p·f.
 *
 * Deliberate departures, each where the reference breaks (design §5):
 * - the tie-break compares queues in tokens on both sides (the reference mixes tokens and chars);
 * - an empty prompt does not update f (the reference divides by zero: f → Infinity → NaN);
 * - zero token counts, failed and aborted requests update nothing but q_i;
 * - every estimate is kept finite and non-negative.
 */
const Params = z.strictObject({
  /** EMA smoothing factor α. */
  alpha: z.number().gt(0).lte(1).default(0.2),
  /** Initial token factor f (tokens per character). */
  initialF: z.number().gt(0).max(10).default(0.25),
});

interface Backend {
  /** Characters of prompts in flight. */
  q: number;
  /** Seconds per token; undefined until the first measured answer. */
  t: number | undefined;
  gamma: number;
}

interface InFlight {
  chars: number;
  /** Ŵ computed for the chosen backend when the request was routed, seconds. */
  estimate: number;
}

/** Runs of two or more whitespace characters (space, \t, \n, \v, \f, \r). */
const WHITESPACE_RUNS = /[\t\n\v\f\r ]{2,}/g;

/**
 * Characters excluding runs of whitespace (a run counts as one): the length less each run's extra
 * characters. Prompts have few runs, and the regex engine skips to them in native code (a loop
 * over every character cost ~7x more on mixed-4x's prompts, and prompts run to tens of thousands
 * of characters).
 */
export function collapsedLength(text: string): number {
  let n = text.length;
  WHITESPACE_RUNS.lastIndex = 0;
  for (let m = WHITESPACE_RUNS.exec(text); m !== null; m = WHITESPACE_RUNS.exec(text)) n -= m[0].length - 1;
  return n;
}

export function ollamaRouter(ctx: PolicyContext): Policy {
  const { alpha, initialF } = parseParams(Params, ctx.params, 'ollama-router');
  let f = initialF;
  const backends = new Map<string, Backend>();
  const flights = new Map<string, InFlight>();
  const state = (name: string): Backend => {
    let b = backends.get(name);
    if (!b) backends.set(name, (b = { q: 0, t: undefined, gamma: 1 }));
    return b;
  };
  const estimate = (b: Backend, requestTokens: number): number =>
    b.t === undefined ? 0 : (b.gamma * b.q * f + requestTokens) * b.t;
  /** The last prompt measured and its collapsed length: a pick and its dispatch read the same one. */
  let lastText: string | undefined;
  let lastChars = 0;
  const charsOf = (text: string): number => {
    if (text !== lastText) {
      lastChars = collapsedLength(text);
      lastText = text;
    }
    return lastChars;
  };

  return {
    name: 'ollama-router',
    // Its own queue estimates decide, never engine metrics, and some candidate is always chosen
    // (a timed one when any is timed): no probes needed.
    traits: { readsMetrics: false, holds: false },
    pick(req: RequestInfo, candidates: readonly BackendView[]) {
      const requestTokens = charsOf(req.promptText) * f;
      let anyTimed = false;
      for (let i = 0; i < candidates.length && !anyTimed; i++)
        anyTimed = state(candidates[i]!.name).t !== undefined;
      let chosen: BackendView | undefined;
      let best = Infinity;
      let bestQueue = Infinity;
      for (let i = 0; i < candidates.length; i++) {
        const c = candidates[i]!;
        const b = state(c.name);
        // With any estimate known, only timed backends or idle untimed ones are candidates.
        if (anyTimed && b.t === undefined && b.q > 0) continue;
        const w = estimate(b, requestTokens);
        const queueTokens = b.q * f;
        if (chosen === undefined || w < best || (w === best && queueTokens < bestQueue)) {
          chosen = c;
          best = w;
          bestQueue = queueTokens;
        }
      }
      return chosen ?? HOLD.retry;
    },
    onDispatch(req, backend) {
      const b = state(backend.name);
      const chars = charsOf(req.promptText);
      flights.set(req.id, { chars, estimate: estimate(b, chars * f) });
      b.q += chars;
    },
    onComplete(req, backend, report) {
      const fl = flights.get(req.id);
      if (!fl) return;
      flights.delete(req.id);
      const b = state(backend.name);
      b.q = Math.max(0, b.q - fl.chars);
      if (!report.ok) return;
      const T = (report.completionTokens ?? 0) + (report.promptTokens ?? 0);
      const W = (report.finishedAt - report.dispatchedAt) / 1000;
      if (!(T > 0) || !(W >= 0)) return;
      const t = W / T;
      b.t = finiteOr(b.t === undefined ? t : alpha * t + (1 - alpha) * b.t, b.t);
      if (fl.chars > 0) f = finiteOr(alpha * (T / fl.chars) + (1 - alpha) * f, f);
      b.gamma =
        fl.estimate === 0
          ? 1
          : finiteOr(Math.max(0, Math.min(2, b.gamma * (1 + alpha * (W / fl.estimate - 1)))), b.gamma);
    },
    onBackendRemoved(name) {
      backends.delete(name);
    },
    describe(name) {
      const b = backends.get(name);
      if (!b) return { queueChars: 0, tokenFactor: f };
      return {
        queueChars: b.q,
        queueWeight: b.gamma,
        tokenFactor: f,
        ...(b.t !== undefined ? { timePerTokenS: b.t } : {}),
      };
    },
  };
}
