import { z } from 'zod';
import { MlpNet } from '../../estimators/mlp.js';
import { HOLD } from '../../types.js';
import type {
  BackendView,
  FitGate,
  Hold,
  Policy,
  PolicyContext,
  PolicyTraits,
  RequestInfo,
} from '../../types.js';
import { parseParams } from '../framework/params.js';
import { trackedHooks } from '../framework/tracked-policy.js';
import { WorkloadParams, WorkloadTracker, type BackendWork } from '../shared/workload-tracker.js';

/**
 * The performance-aware router §4.3's RL router: a Double-DQN Q-function (trained in the simulator by `llmlb train`)
 * scores "send the head request to backend m" for each candidate, plus "wait" (hold it in the
 * router queue). Pure: it is given the weights document; reading the file is the host's (a
 * reader passed to createPolicy as `PolicyDeps.rlWeights`, called at policy creation, never per
 * request).
 *
 * Two network layouts:
 * - `arch: 'shared-head'` (what `llmlb train` writes): ONE small network scores every option from
 *   the head request's features plus that option's own row (a backend's work, or "wait" with the
 *   fleet's summary). Permutation-equivariant — no backend slot can dominate — and independent of
 *   the fleet's size, so weights trained on 4 backends route 16. Every input is clipped to the
 *   range training saw (featureClip), so a fleet busier than the training one is not scored on
 *   extrapolated inputs.
 * - no `arch` (older files): one flat network over all trained slots' features, one output per
 *   slot plus "wait"; backends past the trained slots get requests only when no slotted one can.
 */
export interface RlWeights {
  readonly kind: 'llmlb-rl';
  /** 'shared-head', or absent for the flat per-slot layout. */
  readonly arch?: 'shared-head' | undefined;
  /** Backends the network was trained on (flat layout: its slots, by registration index). */
  readonly backends: number;
  /** Answer-length buckets of the predictor the state one-hot encodes. */
  readonly bucketEdges: readonly number[];
  readonly kvCapacityTokens: number;
  /**
   * When held requests were decided again while these weights were trained (`llmlb train
   * --redecide`): the policy's default, since Q-values learned under one cadence misjudge "wait"
   * under another. Absent: 'on-change' (files from before it was recorded).
   */
  readonly redecide?: RlRedecide | undefined;
  readonly net: unknown;
}

export const RL_REDECIDE = ['when-fits', 'head', 'on-change', 'every-event'] as const;
export type RlRedecide = (typeof RL_REDECIDE)[number];

/** Flat layout: features per backend slot (bucket counts, free KV share, earliest completion, flights). */
export const perBackendFeatures = (buckets: number): number => buckets + 3;
/** Flat layout: global features (head's router wait, prompt tokens, bucket one-hot) + slots. */
export const stateSize = (backends: number, buckets: number): number =>
  2 + buckets + backends * perBackendFeatures(buckets);

/**
 * Shared-head layout, one row per option: the head request's features (GLOBAL), then the option's
 * (ROW). Indices below are offsets into a row; `nb` is the number of answer buckets.
 *  global: 0 router wait (s/10) · 1 prompt tokens/1000 · 2 need/KV (prompt + predicted answer) ·
 *          3.. bucket one-hot (nb)
 *  option: 0 is-wait · 1 free KV share · 2 fits · 3 idle · 4 earliest completion (s/10) ·
 *          5 flights/32 · 6 free share − best candidate's · 7 (flights − fewest)/32 ·
 *          8.. flights per predicted bucket /16 (nb)
 * "wait" rows carry the fleet's best free share, soonest completion, fewest flights and mean
 * bucket counts (is-wait = 1, fits = idle = 0, relative terms 0).
 */
export const sharedGlobalSize = (nb: number): number => 3 + nb;
export const sharedOptionSize = (nb: number): number => 8 + nb;
export const sharedRowSize = (nb: number): number => sharedGlobalSize(nb) + sharedOptionSize(nb);

/**
 * [lo, hi] per shared-head input: training and routing see the same bounded inputs, so a fleet
 * busier than the training one is not scored on extrapolated values. In a greedy run of the shipped
 * weights on mixed-4x (seed 2, 7.6 M option rows) only two inputs reach their bounds: router wait
 * (30 s: 40 % of rows, requests held long) and free KV share (−1, overcommitted: 0.8 %).
 */
export function featureClip(nb: number): { lo: Float64Array; hi: Float64Array } {
  const g = sharedGlobalSize(nb);
  const n = sharedRowSize(nb);
  const lo = new Float64Array(n);
  const hi = new Float64Array(n).fill(1);
  const set = (i: number, l: number, h: number): void => {
    lo[i] = l;
    hi[i] = h;
  };
  set(0, 0, 3); // router wait ≤ 30 s
  set(1, 0, 4); // prompt ≤ 4k tokens
  set(2, 0, 2); // need ≤ 2 × KV
  set(g + 1, -1, 1); // free share (negative: overcommitted)
  set(g + 4, 0, 3); // earliest completion ≤ 30 s
  set(g + 5, 0, 4); // ≤ 128 flights
  set(g + 6, -2, 0);
  set(g + 7, 0, 4);
  for (let k = 0; k < nb; k++) set(g + 8 + k, 0, 4);
  return { lo, hi };
}

/**
 * Where the host gets weights: a file path, or undefined for the shipped ones. The host (serve,
 * simulate, whatif, train, tests) passes its reader to createPolicy; the core never touches the
 * file system.
 */
export type RlWeightsSource = (file: string | undefined) => unknown;

const Params = WorkloadParams.omit({ bucketEdges: true, kvCapacityTokens: true }).extend({
  /** Weights file (JSON written by `llmlb train`); absent: the shipped policies/rl-mixed-4x.json. */
  file: z.string().min(1).optional(),
  /** Weights document itself (embedders); wins over `file`. */
  weights: z.unknown().optional(),
  /**
   * When a held request is decided again (default: what the weights were trained under, see
   * RlWeights.redecide). `when-fits`: the network decides whether to hold a request that fits in
   * no backend's KV; a held one is decided again once it fits in some backend's KV (or one is
   * idle), when it is dispatched — a backend changing that leaves it fitting nowhere does not ask
   * it (Policy.fitGate: the scheduler skips it). `head`: the performance-aware router's MDP — only the queue's head is decided; while it
   * waits, the requests behind it wait too, and it is decided again when a backend serving its
   * model changes. `on-change`: every held request is decided again, each on its own, when such a
   * backend changes (a completion frees KV and slots, settings, health); not at every arrival and
   * engine probe. `every-event`: every held request at every pump.
   */
  redecide: z.enum(RL_REDECIDE).optional(),
});

/** Validate a weights document; throws an Error saying what is wrong with it. */
export function parseRlWeights(doc: unknown, where = 'rl weights'): { meta: RlWeights; net: MlpNet } {
  const bad = (why: string): never => {
    throw new Error(`${where}: ${why}`);
  };
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) bad('not a JSON object');
  const d = doc as Partial<Record<keyof RlWeights, unknown>>;
  if (d.kind !== 'llmlb-rl') bad(`kind must be 'llmlb-rl'`);
  if (d.arch !== undefined && d.arch !== 'shared-head') bad(`arch must be 'shared-head' or absent`);
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
  if (d.redecide !== undefined && !(RL_REDECIDE as readonly unknown[]).includes(d.redecide))
    bad(`redecide must be one of ${RL_REDECIDE.join(', ')}`);
  let net: MlpNet;
  try {
    net = MlpNet.fromJSON(d.net);
  } catch (err) {
    return bad((err as Error).message);
  }
  const m = d.backends as number;
  const nb = (edges as number[]).length + 1;
  const out = net.sizes[net.sizes.length - 1];
  if (d.arch === 'shared-head') {
    const want = sharedRowSize(nb);
    if (net.sizes[0] !== want) bad(`net input must be ${want} (shared head, ${nb} buckets)`);
    if (out !== 1) bad('net output must be 1 (one Q value per option)');
  } else {
    const want = stateSize(m, nb);
    if (net.sizes[0] !== want) bad(`net input must be ${want} (state for ${m} backends, ${nb} buckets)`);
    if (out !== m + 1) bad(`net output must be ${m + 1} (${m} backends + wait)`);
  }
  return { meta: d as unknown as RlWeights, net };
}

/**
 * What training sees of each decision (llmlb train, shared head): `rows` holds `n` option rows
 * of `sharedRowSize` each — the candidates in their order, then "wait" when it is allowed — and
 * the returned row index is the action.
 */
export interface RlExplore {
  act(rows: Float64Array, n: number, waitAllowed: boolean): number;
}

export interface RlPolicy extends Policy {
  readonly tracker: WorkloadTracker;
}

/** Most candidates one decision scores (a bound on the buffers; fleets are far smaller). */
const MAX_OPTIONS = 4096;

/**
 * Build the policy from a parsed network. `explore` (training, shared head only) replaces the
 * greedy choice.
 */
export function rlPolicyFrom(
  meta: RlWeights,
  net: MlpNet,
  params: Omit<z.output<typeof Params>, 'file' | 'weights' | 'redecide'> & {
    redecide?: RlRedecide | undefined;
  },
  explore?: RlExplore,
): RlPolicy {
  const { redecide = meta.redecide ?? 'on-change', ...tracked } = params;
  const tracker = new WorkloadTracker({
    ...tracked,
    bucketEdges: [...meta.bucketEdges],
    kvCapacityTokens: meta.kvCapacityTokens,
  });
  // Its features read the tracker and in-flight counts, never engine metrics. A held head holds
  // its whole group (HOLD.load): the scheduler asks no one behind it until a backend changes.
  const hold: Hold =
    redecide === 'head' ? HOLD.load : redecide === 'every-event' ? HOLD.retry : HOLD.untilChange;
  const traits: PolicyTraits =
    redecide === 'when-fits'
      ? { holdsIgnoreMetrics: true, fitGate: fitGate(tracker) }
      : redecide === 'every-event'
        ? {}
        : { holdsIgnoreMetrics: true };
  const hooks = trackedHooks(tracker);
  if (meta.arch !== 'shared-head') {
    if (explore) throw new Error('rl: training needs the shared-head layout');
    if (redecide === 'when-fits') throw new Error('rl: redecide when-fits needs the shared-head layout');
  }
  const decide =
    meta.arch !== 'shared-head' ? flatPicker(meta, net, tracker) : sharedPicker(meta, net, tracker, explore);
  return {
    name: 'rl',
    tracker,
    traits,
    pick: (req, candidates, now) => decide(req, candidates, now) ?? hold,
    ...hooks,
  };
}

/**
 * "Wait" is offered only while the request fits nowhere (sharedPicker's waitOk): need above every
 * candidate's free KV, none idle. So a held request whose need is above this bound is held again.
 */
function fitGate(tracker: WorkloadTracker): FitGate {
  const s: ScanOut = { free: 0, earliest: 0 };
  return {
    size(req) {
      const p = tracker.predict(req);
      return p.promptTokens + p.expectedOut;
    },
    bound(candidates, now) {
      let best = -Infinity;
      for (const c of candidates) {
        // The same free KV as the picker's scan, so the comparison is the same to the last bit.
        const w = scanBackend(tracker, c.name, now, s);
        if (c.inFlight === 0 || w.flights.size === 0) return Infinity;
        if (s.free > best) best = s.free;
      }
      return best;
    },
  };
}

/** Per-candidate numbers one decision needs, in preallocated typed arrays. */
interface Scan {
  free: Float64Array;
  earliest: Float64Array;
  flights: Float64Array;
  work: (BackendWork | undefined)[];
}

/** A backend's free KV and earliest completion at an instant (scanBackend's answer). */
interface ScanOut {
  free: number;
  earliest: number;
}

/**
 * A backend's work, KV free (Eq. 1–2's Σ p_j + d_j below capacity, as WorkloadTracker.freeTokens)
 * and earliest completion (as earliestCompletionS) at `now`. The tracker's pass over the flights is
 * memoised until they change, so the fit gate and the picker asking at one instant, and every
 * request asked between two changes, share it.
 */
function scanBackend(tracker: WorkloadTracker, name: string, now: number, out: ScanOut): BackendWork {
  const w = tracker.scanned(name, now);
  out.free = tracker.cfg.kvCapacityTokens - w.ctxValue;
  out.earliest = w.earliestValue;
  return w;
}

/** A network's decision: a candidate, or undefined to hold (the policy adds its hold reason). */
type RawPick = (req: RequestInfo, candidates: readonly BackendView[], now: number) => BackendView | undefined;

function sharedPicker(
  meta: RlWeights,
  net: MlpNet,
  tracker: WorkloadTracker,
  explore: RlExplore | undefined,
): RawPick {
  const nb = meta.bucketEdges.length + 1;
  const G = sharedGlobalSize(nb);
  const F = sharedRowSize(nb);
  const kv = meta.kvCapacityTokens;
  const { lo, hi } = featureClip(nb);
  let rows = new Float64Array(8 * F);
  const scan: Scan = {
    free: new Float64Array(8),
    earliest: new Float64Array(8),
    flights: new Float64Array(8),
    work: [],
  };
  const grow = (n: number): void => {
    if (scan.free.length > n) return;
    const cap = Math.max(n + 1, 2 * scan.free.length);
    rows = new Float64Array(cap * F);
    scan.free = new Float64Array(cap);
    scan.earliest = new Float64Array(cap);
    scan.flights = new Float64Array(cap);
  };
  const s: ScanOut = { free: 0, earliest: 0 };
  /** Clip inputs [from, to) of the row at `o` to their training range. */
  const clip = (o: number, from: number, to: number): void => {
    for (let i = from; i < to; i++) {
      const v = rows[o + i]!;
      rows[o + i] = v < lo[i]! ? lo[i]! : v > hi[i]! ? hi[i]! : v;
    }
  };

  return (req: RequestInfo, candidates: readonly BackendView[], now: number): BackendView | undefined => {
    const n = Math.min(candidates.length, MAX_OPTIONS);
    if (n === 0) return undefined;
    grow(n);
    const p = tracker.predict(req);
    const need = p.promptTokens + p.expectedOut;
    // "Wait" is offered only when the request fits in no candidate's KV now (seed §4.3: holding
    // it beats queueing it at an instance short of memory) and every candidate has work in
    // flight, whose completion re-asks; otherwise holding only adds router wait.
    let waitOk = true;
    let bestFree = -Infinity;
    let soonest = Infinity;
    let fewest = Infinity;
    for (let i = 0; i < n; i++) {
      const c = candidates[i]!;
      const w = scanBackend(tracker, c.name, now, s);
      const fl = w.flights.size;
      scan.free[i] = s.free / kv;
      scan.earliest[i] = s.earliest;
      scan.flights[i] = fl;
      scan.work[i] = w;
      if (c.inFlight === 0 || fl === 0 || s.free >= need) waitOk = false;
      if (scan.free[i]! > bestFree) bestFree = scan.free[i]!;
      if (s.earliest < soonest) soonest = s.earliest;
      if (fl < fewest) fewest = fl;
    }
    // Row 0's global part; training gets it copied into every row, the greedy pass reads it once.
    for (let i = 0; i < G; i++) rows[i] = 0;
    rows[0] = (now - req.arrivedAt) / 10_000;
    rows[1] = p.promptTokens / 1000;
    rows[2] = need / kv;
    rows[3 + p.bucket] = 1;
    clip(0, 0, G);
    const total = waitOk ? n + 1 : n;
    for (let i = 0; i < total; i++) {
      const o = i * F;
      if (i > 0 && explore) for (let k = 0; k < G; k++) rows[o + k] = rows[k]!;
      const q = o + G;
      if (i < n) {
        const w = scan.work[i]!;
        const fl = scan.flights[i]!;
        rows[q] = 0;
        rows[q + 1] = scan.free[i]!;
        rows[q + 2] = fl === 0 || scan.free[i]! * kv >= need ? 1 : 0;
        rows[q + 3] = fl === 0 ? 1 : 0;
        rows[q + 4] = scan.earliest[i]! / 10;
        rows[q + 5] = fl / 32;
        rows[q + 6] = scan.free[i]! - bestFree;
        rows[q + 7] = (fl - fewest) / 32;
        for (let k = 0; k < nb; k++) rows[q + 8 + k] = w.bucketCounts[k]! / 16;
      } else {
        rows[q] = 1;
        rows[q + 1] = bestFree;
        rows[q + 2] = 0;
        rows[q + 3] = 0;
        rows[q + 4] = soonest / 10;
        rows[q + 5] = fewest / 32;
        rows[q + 6] = 0;
        rows[q + 7] = 0;
        for (let k = 0; k < nb; k++) {
          let sum = 0;
          for (let j = 0; j < n; j++) sum += scan.work[j]!.bucketCounts[k]!;
          rows[q + 8 + k] = sum / 16 / n;
        }
      }
      clip(o, G, F);
    }
    let a: number;
    if (explore) a = explore.act(rows, total, waitOk);
    else {
      a = 0;
      let best = -Infinity;
      // The head request's inputs are the same in every row: their first-layer share once.
      net.prepareShared(rows, G);
      for (let i = 0; i < total; i++) {
        const v = net.forwardRest(rows, i * F)[0]!;
        if (v > best) {
          best = v;
          a = i;
        }
      }
    }
    return a >= n ? undefined : candidates[a];
  };
}

/** The older flat layout: one network over every trained slot's features. */
function flatPicker(meta: RlWeights, net: MlpNet, tracker: WorkloadTracker): RawPick {
  const m = meta.backends;
  const nb = meta.bucketEdges.length + 1;
  const per = perBackendFeatures(nb);
  const state = new Float64Array(stateSize(m, nb));
  const bySlot: (BackendView | undefined)[] = new Array<BackendView | undefined>(m).fill(undefined);
  const names: (string | undefined)[] = new Array<string | undefined>(m).fill(undefined);
  const kv = meta.kvCapacityTokens;
  const out: ScanOut = { free: 0, earliest: 0 };
  return (req, candidates, now) => {
    if (candidates.length === 0) return undefined;
    bySlot.fill(undefined);
    const p = tracker.predict(req);
    state.fill(0);
    state[0] = Math.min(10, Math.max(0, (now - req.arrivedAt) / 1000 / 10));
    state[1] = p.promptTokens / 1000;
    state[2 + p.bucket] = 1;
    const need = p.promptTokens + p.expectedOut;
    let waitOk = true;
    let any = false;
    for (const c of candidates) {
      if (c.index < m) {
        bySlot[c.index] = c;
        names[c.index] = c.name;
        any = true;
      } else if (tracker.flights(c.name) === 0 || tracker.fits(c.name, need, now)) waitOk = false;
      if (c.inFlight === 0) waitOk = false;
    }
    if (!any) return candidates[0]; // only backends the network never saw
    for (let s = 0; s < m; s++) {
      const name = names[s];
      if (name === undefined) continue;
      const o = 2 + nb + s * per;
      const w = scanBackend(tracker, name, now, out);
      const { free, earliest } = out;
      if (bySlot[s] !== undefined && (w.flights.size === 0 || free >= need)) waitOk = false;
      for (let k = 0; k < nb; k++) state[o + k] = w.bucketCounts[k]! / 16;
      state[o + nb] = free / kv;
      state[o + nb + 1] = w.flights.size === 0 ? 0 : Math.min(10, earliest / 10);
      state[o + nb + 2] = w.flights.size / 32;
    }
    const q = net.forward(state);
    let a = -1;
    for (let i = 0; i <= m; i++)
      if ((i === m ? waitOk : bySlot[i] !== undefined) && (a < 0 || q[i]! > q[a]!)) a = i;
    return a === m ? undefined : bySlot[a];
  };
}

/**
 * The `rl` built-in: `{ name: rl, file: policy.json }`; no file: the shipped mixed-4x weights, both
 * read by `source` (the host's reader); `weights:` (the document itself) needs none.
 */
export function rl(ctx: PolicyContext, source?: RlWeightsSource): Policy {
  const { file, weights, ...rest } = parseParams(Params, ctx.params, 'rl');
  let doc = weights;
  const where = file === undefined ? 'policy rl: shipped weights' : `policy rl: file '${file}'`;
  if (doc === undefined) {
    if (!source) throw new Error(`${where}: no weights reader given to this host's createPolicy`);
    try {
      doc = source(file);
    } catch (err) {
      throw new Error(`${where}: ${(err as Error).message}`);
    }
  }
  const { meta, net } = parseRlWeights(doc, where);
  return rlPolicyFrom(meta, net, rest);
}
