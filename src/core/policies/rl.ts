import { z } from 'zod';
import { Mlp } from '../../rl/mlp.js';
import type { BackendView, Policy, PolicyContext, RequestInfo } from '../types.js';
import { parseParams } from './params.js';
import { trackedHooks } from './tracked-policy.js';
import { WorkloadParams, WorkloadTracker } from './workload-tracker.js';

/**
 * Seed 004 §4.3's RL router: a Double-DQN Q-network (trained in the simulator by `llmlb train`)
 * scores "send the head request to backend m" for each of the m backends it was trained on, plus
 * "wait" (hold it in the router queue). Pure: it is given the weights document; reading the file
 * is the host's (installRlWeightsSource, at policy creation, never per request).
 */
export interface RlWeights {
  readonly kind: 'llmlb-rl';
  /** Backend slots the network was trained on (backends by registration index 0..backends-1). */
  readonly backends: number;
  /** Answer-length buckets of the predictor the state one-hot encodes. */
  readonly bucketEdges: readonly number[];
  readonly kvCapacityTokens: number;
  readonly net: unknown;
}

/** Features per backend slot: bucket counts, then free KV share, earliest completion, flights. */
export const perBackendFeatures = (buckets: number): number => buckets + 3;
/** Global features: head's router wait, prompt tokens, predicted bucket one-hot. */
export const stateSize = (backends: number, buckets: number): number =>
  2 + buckets + backends * perBackendFeatures(buckets);

/** Where the host gets weights: a file path, or undefined for the shipped ones. */
export type RlWeightsSource = (file: string | undefined) => unknown;
let source: RlWeightsSource | undefined;
/** The host (CLI, tests) installs the file reader once; the core never touches the file system. */
export function installRlWeightsSource(fn: RlWeightsSource): void {
  source = fn;
}

const Params = WorkloadParams.omit({ bucketEdges: true, kvCapacityTokens: true }).extend({
  /** Weights file (JSON written by `llmlb train`); absent: the shipped policies/rl-mixed-4x.json. */
  file: z.string().min(1).optional(),
  /** Weights document itself (embedders); wins over `file`. */
  weights: z.unknown().optional(),
});

/** Validate a weights document; throws an Error saying what is wrong with it. */
export function parseRlWeights(doc: unknown, where = 'rl weights'): { meta: RlWeights; net: Mlp } {
  const bad = (why: string): never => {
    throw new Error(`${where}: ${why}`);
  };
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) bad('not a JSON object');
  const d = doc as Partial<Record<keyof RlWeights, unknown>>;
  if (d.kind !== 'llmlb-rl') bad(`kind must be 'llmlb-rl'`);
  if (!Number.isInteger(d.backends) || (d.backends as number) < 1 || (d.backends as number) > 1024)
    bad('backends must be an integer 1..1024');
  const edges = d.bucketEdges;
  if (
    !Array.isArray(edges) ||
    edges.length < 1 ||
    !edges.every((e, i) => Number.isInteger(e) && e > 0 && (i === 0 || e > (edges[i - 1] as number)))
  )
    bad('bucketEdges must be increasing positive integers');
  if (!Number.isInteger(d.kvCapacityTokens) || (d.kvCapacityTokens as number) < 1)
    bad('kvCapacityTokens must be a positive integer');
  let net: Mlp;
  try {
    net = Mlp.fromJSON(d.net);
  } catch (err) {
    return bad((err as Error).message);
  }
  const m = d.backends as number;
  const nb = (edges as number[]).length + 1;
  const want = stateSize(m, nb);
  if (net.sizes[0] !== want) bad(`net input must be ${want} (state for ${m} backends, ${nb} buckets)`);
  if (net.sizes[net.sizes.length - 1] !== m + 1) bad(`net output must be ${m + 1} (${m} backends + wait)`);
  return { meta: d as unknown as RlWeights, net };
}

/** What training sees of each decision (llmlb train): the state, allowed actions, the action. */
export interface RlExplore {
  /** Pick the action (ε-greedy); `allowed(a)` says which are possible. */
  act(state: Float64Array, allowed: (a: number) => boolean): number;
}

export interface RlPolicy extends Policy {
  readonly tracker: WorkloadTracker;
  readonly backends: number;
  /** The state vector of the last decision (reused buffer). */
  readonly lastState: Float64Array;
  /** Backend name per slot seen so far (registration index order). */
  slotName(slot: number): string | undefined;
}

/**
 * Build the policy from a parsed network. `explore` (training) replaces the greedy choice.
 * Backends beyond the trained slots are not seen by the network: they get requests only when no
 * slotted candidate can take one.
 */
export function rlPolicyFrom(
  meta: RlWeights,
  net: Mlp,
  params: Omit<z.output<typeof Params>, 'file' | 'weights'>,
  explore?: RlExplore,
): RlPolicy {
  const m = meta.backends;
  const tracker = new WorkloadTracker({
    ...params,
    bucketEdges: [...meta.bucketEdges],
    kvCapacityTokens: meta.kvCapacityTokens,
  });
  const nb = meta.bucketEdges.length + 1;
  const per = perBackendFeatures(nb);
  const state = new Float64Array(stateSize(m, nb));
  const bySlot: (BackendView | undefined)[] = new Array<BackendView | undefined>(m).fill(undefined);
  const names: (string | undefined)[] = new Array<string | undefined>(m).fill(undefined);
  const kv = meta.kvCapacityTokens;
  let waitOk = false;
  const allowed = (a: number): boolean => (a === m ? waitOk : bySlot[a] !== undefined);

  const fill = (req: RequestInfo, candidates: readonly BackendView[], now: number): void => {
    bySlot.fill(undefined);
    const p = tracker.predict(req);
    state.fill(0);
    state[0] = Math.min(10, Math.max(0, (now - req.arrivedAt) / 1000 / 10));
    state[1] = p.promptTokens / 1000;
    state[2 + p.bucket] = 1;
    // "Wait" is offered only when the request fits in no candidate's KV now (seed §4.3: holding
    // it beats queueing it at an instance short of memory) and every candidate has work in
    // flight, whose completion re-asks; otherwise holding only adds router wait.
    const need = p.promptTokens + p.expectedOut;
    waitOk = candidates.length > 0;
    for (const c of candidates) {
      if (c.index < m) {
        bySlot[c.index] = c;
        names[c.index] = c.name;
      } else if (tracker.flights(c.name) === 0 || tracker.fits(c.name, need, now)) waitOk = false;
      if (c.inFlight === 0) waitOk = false;
    }
    for (let s = 0; s < m; s++) {
      const name = names[s];
      if (name === undefined) continue;
      const o = 2 + nb + s * per;
      const w = tracker.work(name);
      // One pass over the backend's flights for context tokens (Eq. 1–2's Σ p_j + d_j, as
      // WorkloadTracker.contextTokens) and the earliest completion (as earliestCompletionS).
      const pf = tracker.prefillS(name);
      const dc = tracker.decodeS(name);
      let ctx = 0;
      let earliest = Infinity;
      for (const f of w.flights.values()) {
        const el = (now - f.dispatchedAt) / 1000 - f.promptTokens * pf;
        const produced = el <= 0 ? 0 : Math.min(f.expectedOut, el / dc);
        ctx += f.promptTokens + produced;
        const left = (f.expectedOut - produced) * dc;
        if (left < earliest) earliest = left;
      }
      const free = kv - ctx;
      if (bySlot[s] !== undefined && (w.flights.size === 0 || free >= need)) waitOk = false;
      for (let k = 0; k < nb; k++) state[o + k] = w.bucketCounts[k]! / 16;
      state[o + nb] = free / kv;
      state[o + nb + 1] = w.flights.size === 0 ? 0 : Math.min(10, Math.max(0, earliest) / 10);
      state[o + nb + 2] = w.flights.size / 32;
    }
  };

  return {
    name: 'rl',
    tracker,
    backends: m,
    lastState: state,
    slotName: (s) => names[s],
    pick(req, candidates, now) {
      if (candidates.length === 0) return undefined;
      fill(req, candidates, now);
      let any = false;
      for (let s = 0; s < m; s++) if (bySlot[s]) any = true;
      if (!any) return candidates[0]; // only backends the network never saw
      let a: number;
      if (explore) a = explore.act(state, allowed);
      else {
        const q = net.forward(state);
        a = -1;
        for (let i = 0; i <= m; i++) if (allowed(i) && (a < 0 || q[i]! > q[a]!)) a = i;
      }
      return a === m ? undefined : bySlot[a];
    },
    ...trackedHooks(tracker),
  };
}

/** The `rl` built-in: `{ name: rl, file: policy.json }`; no file: the shipped mixed-4x weights. */
export function rl(ctx: PolicyContext): Policy {
  const { file, weights, ...rest } = parseParams(Params, ctx.params, 'rl');
  let doc = weights;
  const where = file === undefined ? 'policy rl: shipped weights' : `policy rl: file '${file}'`;
  if (doc === undefined) {
    if (!source) throw new Error(`${where}: no weights source installed in this host`);
    try {
      doc = source(file);
    } catch (err) {
      throw new Error(`${where}: ${(err as Error).message}`);
    }
  }
  const { meta, net } = parseRlWeights(doc, where);
  return rlPolicyFrom(meta, net, rest);
}
