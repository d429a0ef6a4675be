import { z } from 'zod';
import type { PluginContext, Scorer } from '../../framework/plugin.js';
import { parseParams } from '../../framework/params.js';
import { WorkloadParams, WorkloadTracker } from '../../shared/workload-tracker.js';

export const MixingParams = WorkloadParams.extend({
  /** Weight of the prompt-phase penalty against the decode-phase one (the performance-aware router §5: 0.5). */
  mixAlpha: z.number().gt(0).lt(1).default(0.5),
  /** Prefill gradient, s per token (the performance-aware router §3, Llama-2-7B on V100). */
  grad1: z.number().positive().default(3.2e-4),
  /** Decode gradient, s per token (the performance-aware router §3). */
  grad2: z.number().positive().default(3.3e-5),
  /** ε of Eq. 1: prompt-phase impact above this many seconds is penalised (default: the heavy-prompt 0.5 s). */
  epsilonS: z.number().positive().default(0.5),
});

export interface MixingTerms {
  /** Eq. 1's T_p: grad1 · (p_i² + Σ_j (p_j + d_j)). */
  readonly tp: number;
  readonly rp: number;
  readonly rd: number;
  /** α·r_p + (1 − α)·r_d: higher is better (less mixing impact). */
  readonly r: number;
}

/**
 * The performance-aware router Eq. 1–2 for request i (p_i prompt, d_i predicted decode tokens) joining a backend whose
 * requests hold `context` = Σ_j (p_j + d_j) tokens. Eq. 2 is read as −grad2 · (Σ_j (p_j + d_j) +
 * p_i + d_i): the printed "−grad2·Σ + p_i + d_i" leaves the request's own tokens unscaled, which
 * contradicts the seed's stated range [−1, 1]; either way only Σ differs between backends.
 */
export function mixingTerms(
  pi: number,
  di: number,
  context: number,
  o: { grad1: number; grad2: number; epsilonS: number; mixAlpha: number },
): MixingTerms {
  const tp = o.grad1 * (pi * pi + context);
  const rp = tp <= o.epsilonS ? 1 : 1 - tp / o.epsilonS;
  const rd = -o.grad2 * (context + pi + di);
  return { tp, rp, rd, r: o.mixAlpha * rp + (1 - o.mixAlpha) * rd };
}

/** mixingTerms(…).r without the object (a scorer computes it for every candidate of every request). */
export function mixingScore(
  pi: number,
  di: number,
  context: number,
  o: { grad1: number; grad2: number; epsilonS: number; mixAlpha: number },
): number {
  const tp = o.grad1 * (pi * pi + context);
  const rp = tp <= o.epsilonS ? 1 : 1 - tp / o.epsilonS;
  const rd = -o.grad2 * (context + pi + di);
  return o.mixAlpha * rp + (1 - o.mixAlpha) * rd;
}

/**
 * Mixing-impact scorer (the performance-aware router §4.2): r_mixing of this request on each candidate, from the
 * prompt and decode tokens of what this router has in flight there (WorkloadTracker) and the
 * request's predicted answer; min–max scaled to [0, 1] (all equal: 1). Composable in
 * EndpointPickerConfig YAML like any scorer; its parameters are the tracker's and Eq. 1–2's.
 */
export function mixingImpactScorer(ctx: PluginContext, shared?: WorkloadTracker): Scorer {
  const p = parseParams(MixingParams, ctx.params, ctx.name);
  const tracker = shared ?? new WorkloadTracker(p);
  const own = shared === undefined;
  return {
    kind: 'scorer',
    type: 'mixing-impact-scorer',
    name: ctx.name,
    score(req, candidates, now, out) {
      const { promptTokens, expectedOut } = tracker.predict(req);
      let min = Infinity;
      let max = -Infinity;
      for (let i = 0; i < candidates.length; i++) {
        const r = mixingScore(promptTokens, expectedOut, tracker.contextTokens(candidates[i]!.name, now), p);
        out[i] = r;
        if (r < min) min = r;
        if (r > max) max = r;
      }
      const range = max - min;
      for (let i = 0; i < candidates.length; i++) out[i] = range > 0 ? (out[i]! - min) / range : 1;
    },
    // A shared tracker is fed by its owner; an own one needs the hooks.
    ...(own
      ? {
          onDispatch: (req, backend, now) => tracker.onDispatch(req, backend, now),
          onComplete: (req, backend, report) => tracker.onComplete(req, backend, report),
          onBackendRemoved: (name) => tracker.onBackendRemoved(name),
          describe: (name) => tracker.describe(name),
          requestClass: (id, backend) => tracker.flightClass(id, backend),
        }
      : {}),
  };
}
