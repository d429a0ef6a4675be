import { HOLD } from '../../../types.js';
import type { BackendView, Policy, PolicyContext, RequestInfo } from '../../../types.js';
import { WaitEstimator } from './estimator.js';
import { parseEstimatedWaitParams } from './params.js';
import {
  evictPenalty,
  loraPenalty,
  missPenalty,
  missPrice,
  queuedPastSlots,
  ttftPenalty,
} from './candidate-cost.js';
import { LoraSlots } from '../../shared/lora-slots.js';
import { roomInside } from './slots.js';
import { chooseCandidate } from './choose.js';
import { replicaFor } from './replicate.js';

export { rrBefore } from './choose.js';

/**
 * Our estimated-wait router (the default). For each candidate it predicts when *this* request
 * would finish there, and picks the earliest. It fixes what OllamaRouter's estimate gets wrong, and
 * models a continuous-batching engine (issue #20, docs/results.md):
 *
 * - Rates come from the engine's own durations (Ollama prompt_eval_duration / eval_duration), so
 *   queueing inside the engine does not inflate "time per token"; prefill and decode are
 *   separate (a long prompt and a long answer cost differently).
 * - A batching engine's decode step slows with every sequence in the batch. Each backend's time
 *   per output token is fitted against the batch it was measured in (the router's in-flight count
 *   averaged over the request's life), and a new request is costed at the batch it would join
 *   (in flight + 1). So load shows in the estimate before any queue forms, and a rate measured
 *   under a heavy batch is not taken for a slow backend (the feedback loop an EMA of raw rates
 *   had: a backend that looked fast got work, then looked slow, …).
 * - Prefill time is fitted against prompt length (its intercept is the decode step the prefill
 *   shares with the batch).
 * - A request waits for a slot only when the engine is full: at its learned slot count (a lower
 *   bound raised by requests that did not queue, an upper one set by requests that did), or when
 *   its probed metrics show requests waiting. A backend seen batching with no limit seen is not
 *   charged a queue at all. When full, the in-flight requests are replayed FIFO over the slots.
 * - Output length is predicted per model and prompt-length bucket (online), capped by the
 *   client's max tokens; answers cut at that cap are censored observations (they weigh the cap in),
 *   and requests in flight are re-predicted as the predictor learns. `outputLength: learned` asks the
 *   text-aware OutputLengthModel instead, once per request (opt-in: mixed-4x −11 %, a few skylb
 *   scenarios 1–3 % worse; docs/results.md).
 * - Late binding: engines admit FIFO, so a request pushed into an engine that already queues
 *   requests inside commits every later one there to wait behind it. A request that every engine
 *   would queue behind another waits in the router instead, and held requests take the room that
 *   frees in response-ratio order (HRRN: (waited + predicted service) / predicted service), so
 *   short requests are not stuck behind long ones and no request starves (issue #20,
 *   heimdall-burst: +34 % → −24 % vs least-connections).
 * - A pick is priced at its marginal cost to the fleet: its own finish plus the delay it adds to
 *   the requests it runs beside (its prefill stalls their batch, its sequence slows every decode
 *   step), also on a full engine, where it adds them once admitted. Without it each request picks
 *   the fast replica of an unequal fleet whose batch it then slows for everyone.
 * - Prefix credit: a backend this router recently sent the same prompt prefix (a conversation's
 *   earlier turns, a shared document) likely holds it in its prefix cache, and is charged prefill
 *   only for the rest (prefix-credit.ts: per backend, an LRU of the prompt chunks sent there, sized
 *   in tokens and learned from the cached tokens engines report: cached-prefix.ts).
 * - Locality and load in one cost (issue #30): a candidate that would prefill more of the prompt
 *   than the one holding most of it also pays missWeight × that extra prefill (missPenalty), and
 *   late binding lets a request queue inside a full engine that holds its prefix when its cost
 *   there, the wait inside included, is the lowest (queueForCache). Near saturation that price
 *   grows with the requests queued past the engines' slots (missQueueWeight, missPrice): there a
 *   miss's prefill is work everyone queued waits behind. Without them, prefix-heavy
 *   traffic near saturation spread for load, missed, and each miss's prefill held more.
 * - Time to first token (issue #30): while no engine queues past its slots, the request's own TTFT
 *   there — the prefill it waits behind, then its uncached prefill — is priced ttftWeight times on
 *   top of its finish (ttftPenalty), so a re-sent long prompt is not moved off its holder for a
 *   little decode time saved in a smaller batch (that prefill was the TTFT tail at light load).
 * - Slot caches (issue #30, llama.cpp: each slot keeps one prompt): a pick whose slot would drop the
 *   only copy of another prompt pays slotEvictWeight × that prompt's prefill (evictPenalty), so first
 *   reads spread over empty slots rather than evict each other on the engine learned fastest.
 * - Estimates within `tieTolerance` of the best are ties (their difference is below the noise of
 *   the fits): the one with fewer in flight wins, then an unmeasured one, then round-robin order.
 *   Identical replicas then split load evenly rather than by their fits' noise.
 * - No winner-takes-all: a backend with no samples, or whose samples went stale while it sat
 *   idle, is costed with the fleet's best fits, so it is tried (re-measured) when idle.
 *
 * Where each part lives (this folder): params.ts (parameters), backend-state.ts (per-backend fits,
 * slots, flights, area), slots.ts (admission), rates.ts (fits as seconds), wait-model.ts (start
 * wait, delay to others), sizing.ts (prompt and output tokens, HRRN sizes), cached-prefix.ts
 * (prefix credit), candidate-cost.ts (a candidate's cost: the seam where they are priced together),
 * learn-rates.ts (fits from answers), estimator.ts (all of it per candidate, shared with the
 * scorer), choose.ts (the lowest cost and the tie-break) and this file: the pick — late binding,
 * the HRRN hooks.
 */

/** The policy, plus its per-candidate estimates for estimated-wait-scorer. */
export interface EstimatedWaitPolicy extends Policy {
  /** Writes, per candidate, the seconds from `now` until this request would finish there; counts a decision. */
  estimates(req: RequestInfo, candidates: readonly BackendView[], now: number, out: Float64Array): void;
}

export function estimatedWait(ctx: PolicyContext): EstimatedWaitPolicy {
  const p = parseEstimatedWaitParams(ctx.params);
  const est = new WaitEstimator(p);
  const lora = p.lora ? new LoraSlots(p.maxLora) : undefined;
  let cursor = 0;
  let scratch = new Float64Array(8);
  /** Per candidate of the current pick: 1 where it may be pushed now (late binding). */
  let open = new Uint8Array(8);
  let lastCount = 0;

  /**
   * Late binding: marks in `open` the candidates with room for the request (see roomInside), and
   * says whether to hold it in the router instead: when none has room. The room depends on the
   * candidates' load alone, so the scheduler holds the model's other waiters without asking until a
   * backend changes (HOLD.load), and offers them in response-ratio order (queueOrder) when
   * one does: the room that frees goes to the highest ratio first.
   */
  const holdForLater = (candidates: readonly BackendView[]): boolean => {
    est.bind(candidates);
    let room = 0;
    for (let i = 0; i < candidates.length; i++) {
      const r = roomInside(est.candState[i]!, candidates[i]!, p.defaultSlots);
      open[i] = r > 0 ? 1 : 0;
      room += r;
    }
    return room === 0;
  };

  return {
    name: 'estimated-wait',
    queueOrder:
      p.lateBinding && p.heldOrder === 'ratio'
        ? {
            kind: 'response-ratio',
            size: (req) => est.sizing.size(req, est.registry.list),
            sizes: (reqs, out) => est.sizing.sizesOf(reqs, out, est.registry.list),
            epoch: () => est.sizing.epoch,
            // LoRA engines: whether to hold is each request's (pick's) to say, adapter or not.
            holdsAll: (candidates) => !(lora && anyLora(candidates)) && holdForLater(candidates),
          }
        : undefined,
    pick(req, candidates, now) {
      est.lastNow = now;
      est.forgetPick();
      const n = candidates.length;
      if (n === 0) return HOLD.retry;
      if (scratch.length < n) {
        scratch = new Float64Array(n * 2);
        open = new Uint8Array(n * 2);
      }
      const adapter = lora !== undefined && LoraSlots.anyAdapter(req, candidates);
      if (!p.lateBinding || adapter) {
        // An adapter's request is not held for room: a LoRA engine's waiting count is mostly
        // requests waiting for an adapter slot, which says nothing of room for a loaded adapter;
        // loraPenalty prices the wait for a slot instead.
        open.fill(1, 0, n);
        est.bind(candidates);
      } else if (holdForLater(candidates)) return HOLD.load;
      const promptTokens = est.sizing.promptTokensOf(req);
      const predicted = est.sizing.predictOf(req, promptTokens);
      const best = est.bestCost(promptTokens, predicted);
      est.fillWith(req, candidates, now, promptTokens, predicted, best, scratch, p.othersWeight);
      // Requests queued past the engines' slots: the miss price grows with them, TTFT is priced without.
      const queued =
        (p.prefixCredit > 0 && p.missQueueWeight > 0) || p.ttftWeight > 0
          ? queuedPastSlots(est.candState, est.candSlots, n)
          : 0;
      if (p.prefixCredit > 0) {
        const price = missPrice(queued, n, p.missWeight, p.missQueueWeight);
        missPenalty(est.wait, est.candCost, est.uncached, n, price, scratch);
        evictPenalty(est.wait, est.candCost, est.evicted, n, p.slotEvictWeight, scratch);
      }
      // TTFT priced while no engine queues (light load): past the knee the wait is the tail, not the prefill.
      const ttft = p.ttftWeight > 0 && queued === 0 ? p.ttftWeight : 0;
      ttftPenalty(est.wait, est.candState, est.candCost, est.candSlots, est.uncached, now, n, ttft, scratch);
      // An adapter's load comes before the first token too.
      if (adapter) loraPenalty(lora, req, candidates, n, p.loraSwapS * (1 + ttft), scratch);
      const first = chooseCandidate(est, p, candidates, n, scratch, open, cursor, promptTokens, predicted);
      if (first < 0) return HOLD.retry;
      // A hot prefix whose holder queues too long is copied to an engine with room (replicateHot).
      const chosen = replicaFor(est, p, open, n, scratch, first, now);
      const view = candidates[chosen]!;
      // The round-robin cursor moves at the push (onDispatch), not here: a pick that a router
      // then holds (waiting for allowance, issue #31) must not turn the next tie elsewhere.
      est.decisions++;
      lastCount = n;
      const explored = est.candCost[chosen] !== est.candState[chosen];
      est.rememberPick(req, view, promptTokens, predicted, est.candCached[chosen]!, explored);
      return view;
    },
    explainLast() {
      // Copied only when a decision is explained; scratch holds the last pick's estimates.
      return {
        name: 'estimated-wait: seconds to finish',
        scores: Array.from(scratch.subarray(0, lastCount)),
        detail: {
          cachedTokens: Array.from(est.candCached.subarray(0, lastCount)),
          prefillTokens: Array.from(est.uncached.subarray(0, lastCount)),
          open: Array.from(open.subarray(0, lastCount)),
        },
      };
    },
    estimates: (req, candidates, now, out) => est.estimates(req, candidates, now, out),
    onDispatch: (req, backend, now) => {
      // Ties go round-robin after the last backend pushed to (a pick is always pushed; routers
      // that share their pushes share the order: issue #31).
      cursor = backend.index + 1;
      est.onDispatch(req, backend, now);
      lora?.onDispatch(req, backend);
    },
    onComplete: (req, backend, report, now) => {
      est.onComplete(req, backend, report, now);
      lora?.onComplete(req, backend);
    },
    onBackendRemoved: (name) => {
      est.onBackendRemoved(name);
      lora?.onBackendRemoved(name);
    },
    describe: (name) => est.describe(name),
  };
}

/** Whether some candidate serves LoRA adapters. */
function anyLora(candidates: readonly BackendView[]): boolean {
  for (let i = 0; i < candidates.length; i++) if (candidates[i]!.adapters !== undefined) return true;
  return false;
}
