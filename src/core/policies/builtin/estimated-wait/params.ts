import { z } from 'zod';
import type { PolicyParams } from '../../../types.js';
import { parseParams } from '../../framework/params.js';

/** The estimated-wait policy's parameters (also the estimated-wait scorer's: it shares its estimator). */
export const EstimatedWaitParamsSchema = z.strictObject({
  /** Forgetting rate of the fitted rates (weight each new sample takes). */
  alpha: z.number().gt(0).lte(1).default(0.05),
  /** Output length assumed before any answer for a model was seen. */
  defaultOutputTokens: z.number().int().positive().default(128),
  /** Sequences a backend is assumed to run at once until learned (or its maxConcurrency, if lower). */
  defaultSlots: z.number().int().positive().default(1),
  /**
   * An idle backend that has not been sampled for this many routing decisions is costed
   * optimistically, so it is re-measured. Counted in decisions, not time, so the policy behaves
   * the same at any traffic rate and under a time-scaled bench.
   */
  exploreAfterDecisions: z.number().int().positive().default(8),
  /**
   * Each try of a stale backend (pushed there priced at the fleet's best) doubles the wait before
   * its next one, up to 2^exploreBackoff times exploreAfterDecisions (prefix-unequal-8: a 3× slower
   * replica was re-tried every ~8 decisions it sat idle, ~50 requests a run served 2–3× slower; a
   * backend's own picks re-measure it anyway). 0: a try every exploreAfterDecisions.
   */
  exploreBackoff: z.number().int().nonnegative().max(30).default(6),
  /** Prompt tokens per character before any answer reported a count. */
  initialTokensPerChar: z.number().gt(0).max(10).default(0.25),
  /** Seconds per prompt / output token assumed when no backend has a sample yet. */
  priorPrefillS: z.number().positive().default(0.001),
  priorDecodeS: z.number().positive().default(0.05),
  /** Relative difference of estimates below which two backends always count as tied. */
  tieTolerance: z.number().nonnegative().lt(1).default(0.03),
  /**
   * Estimates closer than this many standard errors of their fits also tie: a difference the
   * fits cannot tell from noise is no reason to load one backend more.
   */
  tieStdErrors: z.number().nonnegative().default(2),
  /**
   * Among near-best estimates (tieTolerance, tieStdErrors), the one holding more of the prompt in its
   * prefix cache goes first, before fewer in flight (issue #30, prefix-agents-8 ×1: a third of the
   * TTFT p90 tail were ties broken for load, off the prompt's holder, a 20–40k-token prefill each).
   * false: in-flight count first, as before.
   */
  tieByCache: z.boolean().default(true),
  /**
   * Weight of the delay this request adds to the others it runs beside (its prefill stalls their
   * batch, its sequence slows their decode steps). 1 prices a pick at its marginal cost to the
   * fleet's total latency, not only its own finish (issue #20: a fast replica's full batch looked
   * cheapest to each request; 0 is the selfish pick).
   */
  othersWeight: z.number().nonnegative().default(1),
  /**
   * Weight of the request's own time to first token in its cost while no engine queues past its
   * slots (ttftPenalty, candidate-cost.ts): the prefill it would wait behind where it has room, then
   * its uncached prefill. On finish time alone the default sent re-sent long prompts off their
   * holder for a second of decode saved in a smaller batch, and their prefill there was the TTFT
   * tail (issue #30, prefix-agents-8 ×1, TTFT p90 ÷ the best built-in, seeds 1 / 2: 1.29 / 1.52 at
   * 0, 1.02 / 1.17 at 4, mean E2E ≤ 1.02× prefix-trie's; 6: 1.00 / 1.09, but skylb-regions-12 seed 2
   * TTFT p90 1.16× the best and agents ×3 / unequal ×2 worse). Off once engines queue: priced there
   * with the slot wait, it took prefix-heavy traffic at ×2 off its holders (prefix-conversations-8
   * ×2 TTFT p90 1.13 → 1.72× the best). 0: the finish-time cost alone.
   */
  ttftWeight: z.number().nonnegative().default(4),
  /**
   * Prefix credit (issue #20, skylb-multiturn-12): share of the prompt prefix a backend likely
   * holds in its prefix cache (what this router sent it, prefix-credit.ts) that is not charged as
   * prefill there — in its own finish and in the stall it adds to the others. 0: every backend
   * is charged the whole prompt. On (1) by default: it changed no result where prompts share no
   * prefix, and helped every skylb scenario (docs/results.md).
   */
  prefixCredit: z.number().min(0).max(1).default(1),
  /**
   * Prompt tokens each backend's prefix cache is taken to hold until its engine reports what it
   * found cached (usage cached_tokens); then learned per backend (cached-prefix.ts). Too large
   * credits prefixes the engine evicted, too small forgets what it holds; the first costs less
   * (issue #30: started small, the default lost its locality at saturation before it learned).
   */
  prefixCacheTokens: z
    .number()
    .int()
    .positive()
    .default(1 << 20),
  /**
   * Affinity memory (issue #30, the knee): a prompt the learned record (prefixCacheTokens) has
   * forgotten is still credited this share of what a four times longer record says was sent to a
   * backend. An engine often still holds part of it, and going back keeps the prompt's blocks in one
   * cache instead of two. 0: off.
   */
  affinityMemory: z.number().min(0).max(1).default(0.5),
  /** Deprecated (before prefixCacheTokens): the same, in 64-character chunks of prompt text. */
  prefixCacheChunks: z.number().int().positive().optional(),
  /**
   * Late binding with cache affinity (issue #30): a request may queue inside an engine with no room
   * when that engine holds part of its prompt and its cost there — the wait inside included — beats
   * every engine with room. Without it a held request goes wherever room frees first, and
   * prefix-heavy traffic near saturation loses its hits: each miss adds prefill, which holds more.
   */
  queueForCache: z.boolean().default(true),
  /**
   * Which full engines queueForCache may queue a request into: those holding at least this share of
   * the most any engine holds of its prompt. 0: any that holds some — at the knee an engine holding
   * only the prompt's shared system prompt took conversations' later turns off their holder, a miss
   * of ~20k tokens each (issue #30: prefix-conversations-8 ×2 mean E2E 21.2 s at 0, 18.3 s at 1).
   */
  queueForCacheShare: z.number().min(0).max(1).default(1),
  /**
   * Hot-prefix replication (issue #30, prefix-documents-8 ×2: all of the TTFT p90 tail was queued
   * inside the full engine holding its document): a request queueForCache would queue into a full
   * holder goes to the cheapest engine with room instead when the holder's time to first token
   * (its start wait, then the uncached prefill) is more than this many times that engine's (its
   * wait, then the whole miss); that engine then holds the prompt too (replicate.ts). 0: off.
   */
  replicateHot: z.number().nonnegative().default(0),
  /**
   * Slot engines (issue #30, prefix-slots-4): a candidate whose slot cache would drop a prompt no
   * other slot holds (slot-mirror.ts evictedChars) is charged this many times that prompt's prefill
   * — its next read prefills it whole (evictPenalty, candidate-cost.ts). Engines that do not say
   * their cache is slots: nothing. 1: that prefill once (prefix-slots-4 ×1 and ×1.5, seeds 1–4:
   * mean E2E lower in all 8 cells, hits 68 → 78 % at ×1 s1; 0.5–2 measured, docs/results.md). 0: off.
   */
  slotEvictWeight: z.number().nonnegative().default(1),
  /**
   * Price of a prefix-cache miss (issue #30): a candidate that would prefill more of the prompt than
   * the one that holds most of it is charged this many times the extra prefill on top of its cost
   * (candidate-cost.ts, missPenalty). Its own finish counts that prefill once; the engine time a miss
   * takes also delays whoever comes after it there, and a document spread over more engines leaves
   * less room in each. 0: the plain estimate, which spreads re-reads of a popular document for load
   * (prefix-heavy sweeps: TTFT p90 ×10 that of prefix-trie); 2 measured best.
   */
  missWeight: z.number().nonnegative().default(2),
  /**
   * Saturation-aware miss price (issue #30, the knee): the miss price grows by this much per request
   * queued past its engine's slots, averaged over the candidates (missPrice, candidate-cost.ts). Near
   * saturation a miss's extra prefill is work every queued request waits behind, not one request's
   * delay; priced once, prefix-heavy traffic at ×2 spread for load, missed and held more
   * (prefix-conversations-8 ×2 mean E2E: 45.8 s at 0, 33.5 s at 1, 26.7 s at 3). 6 since
   * queueForCacheShare (documents / conversations ×2, seeds 1 and 2: 24.4, 44.4, 18.3, 16.6 s at 3;
   * 23.2, 37.6, 18.0, 16.2 s at 6). 0: missWeight alone.
   */
  missQueueWeight: z.number().nonnegative().default(6),
  /**
   * Late binding (issue #20, heimdall-burst): a request is not pushed into an engine that would
   * queue it behind requests already waiting inside (engines admit FIFO): it waits in the router
   * until an engine has room, and the waiting request with the highest response ratio
   * ((waited + service) / service, HRRN) goes first, so a short request is not stuck behind long
   * ones committed to every engine's queue. Engine metrics say what waits inside; without them,
   * what is in flight beyond the sequences the engine is known to run at once.
   */
  lateBinding: z.boolean().default(true),
  /** Order of the requests held by late binding: response ratio (HRRN), or arrival (FIFO). */
  heldOrder: z.enum(['ratio', 'fifo']).default('ratio'),
  /**
   * Output-length prediction: `prior`, an EMA per model and prompt-length bucket (re-predicted
   * as it learns); `learned`, the online softmax predictor over the prompt's text and task hint
   * (OutputLengthModel, issue #17 item 3), asked once per request.
   */
  outputLength: z.enum(['prior', 'learned']).default('prior'),
  /**
   * LoRA adapters (issue #35): a request naming an adapter (BackendView.adapters) pays, where
   * its adapter is not loaded, the adapter's load time (`loraSwapS`), and where no slot is free
   * also the wait for one (loraPenalty, candidate-cost.ts). What is loaded: lora-slots.ts. false:
   * adapters are costed as any model.
   */
  lora: z.boolean().default(true),
  /** Seconds an adapter load takes (vLLM: reading it from disk or host memory into a slot). */
  loraSwapS: z.number().nonnegative().default(0.5),
  /** Adapter slots assumed where the engine does not export vllm:lora_requests_info (--max-loras). */
  maxLora: z.number().int().positive().default(4),
});

export type EstimatedWaitParams = z.output<typeof EstimatedWaitParamsSchema>;

/** Validates them once, at construction; errors name the policy 'estimated-wait' (as they always did). */
export function parseEstimatedWaitParams(params: PolicyParams): EstimatedWaitParams {
  return parseParams(EstimatedWaitParamsSchema, params, 'estimated-wait');
}
