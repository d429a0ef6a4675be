import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Scheduler } from './scheduler.js';
import { ReferenceScheduler } from './scheduler-reference.testing.js';
import { createPolicy, type PolicySpec } from './policies/index.js';
import { createRng } from './rng.js';
import { HOLD } from './types.js';
import type { BackendSpec, BackendView, Decision, Policy, RequestInfo } from './types.js';

/**
 * The incremental pump against the scheduler it replaced (which asked for every held request on
 * every event): random fleets, policies and event sequences must give the same decisions in the
 * same order, the same queue and the same in-flight counts after every step.
 */

const MODELS = ['m1', 'm2', 'm3'];
const NAMES = ['a', 'b', 'c', 'd', 'e'];

/** A policy whose holds follow its own state (HOLD.retry): asked on every pump. */
function moody(): Policy {
  let calls = 0;
  return {
    name: 'moody',
    pick: (_r, c) => (++calls % 3 !== 1 ? HOLD.retry : c[calls % c.length]!),
  };
}

/**
 * A response-ratio policy (as estimated-wait's late binding): holds everything on load alone
 * while every candidate has 2 or more in flight, sizes requests by id, and changes sizes with
 * each completion (its epoch).
 */
function ratio(): Policy {
  let epoch = 0;
  const full = (c: readonly { inFlight: number }[]): boolean => c.every((b) => b.inFlight >= 2);
  return {
    name: 'ratio',
    queueOrder: {
      kind: 'response-ratio',
      size: (r: RequestInfo) => 0.5 + ((Number(r.id.slice(1)) * 7 + epoch) % 5),
      epoch: () => epoch,
      holdsAll: full,
    },
    pick(_r, c) {
      if (full(c)) return HOLD.load;
      return c.reduce((a, b) => (b.inFlight < a.inFlight ? b : a));
    },
    onComplete: () => void epoch++,
  };
}

/**
 * A response-ratio policy that also holds requests for other reasons than load (every third
 * pick, as moody): the walk goes on past a held member, which must not come up again.
 */
function ratioMoody(): Policy {
  let epoch = 0;
  let calls = 0;
  return {
    name: 'ratio-moody',
    queueOrder: {
      kind: 'response-ratio',
      size: (r: RequestInfo) => 0.25 + ((Number(r.id.slice(1)) * 3 + epoch) % 7),
      epoch: () => epoch,
    },
    pick: (_r, c) => (++calls % 3 === 1 ? HOLD.retry : c[calls % c.length]!),
    onComplete: () => void (calls % 2 === 0 && epoch++),
  };
}

/**
 * Holds a request while it fits on no candidate (as kv-fit-filter with backfill): a request's
 * size from its id, a candidate's room from its free slots, an idle one takes anything; with
 * a fit gate (Policy.fitGate), so the scheduler skips held requests that still fit nowhere.
 */
function fits(): Policy {
  const size = (r: RequestInfo): number => Number(r.id.slice(1)) % 7;
  const room = (c: readonly BackendView[]): number => {
    let best = -Infinity;
    for (const b of c) {
      if (b.inFlight === 0) return Infinity;
      best = Math.max(best, 2 * (b.maxConcurrency - b.inFlight));
    }
    return best;
  };
  return {
    name: 'fits',
    traits: { holdsIgnoreMetrics: true, fitGate: { size, bound: (c) => room(c) } },
    pick(r, c) {
      const s = size(r);
      return c.find((b) => b.inFlight === 0 || 2 * (b.maxConcurrency - b.inFlight) >= s) ?? HOLD.untilChange;
    },
  };
}

const POLICIES: (PolicySpec | 'moody' | 'ratio' | 'ratio-moody' | 'fits')[] = [
  { name: 'least-connections' },
  { name: 'least-connections', params: { push: 'sp-p' } },
  { name: 'least-connections', params: { push: 'sp-o', maxOutstanding: 2 } },
  { name: 'round-robin', params: { push: 'sp-p', maxWaiting: 1 } },
  { name: 'consistent-hash', params: { push: 'sp-p' } },
  { name: 'prefix-trie', params: { push: 'sp-o', maxOutstanding: 1, waitForMatchMs: 30 } },
  { name: 'random' },
  'moody',
  'ratio',
  'ratio-moody',
  { name: 'estimated-wait' },
  // Holds one by one until a backend changes (kv-fit-filter with backfill), blind to metrics.
  { name: 'workload-aware', params: { kvCapacityTokens: 300 } },
  { name: 'workload-aware', params: { kvCapacityTokens: 300, backfill: false } },
  'fits',
];

const build = (i: number): Policy => {
  const p = POLICIES[i]!;
  return p === 'moody'
    ? moody()
    : p === 'ratio'
      ? ratio()
      : p === 'ratio-moody'
        ? ratioMoody()
        : p === 'fits'
          ? fits()
          : createPolicy(p, createRng(7));
};

type Event =
  | { k: 'submit'; model: number; exclude: number; prompt: number; priority: number | undefined }
  | { k: 'complete'; pick: number; ok: boolean }
  | { k: 'cancel'; pick: number; queued: boolean }
  | { k: 'health'; b: number; up: boolean }
  | { k: 'drain'; b: number; on: boolean }
  | { k: 'cap'; b: number; cap: number }
  | { k: 'models'; b: number; models: number }
  | { k: 'remove'; b: number }
  | { k: 'add'; b: number; models: number; cap: number }
  | { k: 'metrics'; b: number; waiting: number; running: number }
  | { k: 'pump' }
  | { k: 'expire'; wait: number }
  | { k: 'policy'; p: number };

const b = fc.nat(NAMES.length - 1);
const modelMask = fc.integer({ min: 1, max: (1 << MODELS.length) - 1 });
const cap = fc.constantFrom(1, 2, 3, Infinity);
const event: fc.Arbitrary<Event> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record({
      k: fc.constant('submit' as const),
      model: fc.nat(MODELS.length - 1),
      exclude: fc.nat(31),
      prompt: fc.nat(5),
      // Most without one (the default band), some above it and below it.
      priority: fc.constantFrom(undefined, undefined, undefined, 0, 1, 2, -1),
    }),
  },
  {
    weight: 6,
    arbitrary: fc.record({ k: fc.constant('complete' as const), pick: fc.nat(), ok: fc.boolean() }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ k: fc.constant('cancel' as const), pick: fc.nat(), queued: fc.boolean() }),
  },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('health' as const), b, up: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('drain' as const), b, on: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('cap' as const), b, cap }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('models' as const), b, models: modelMask }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('remove' as const), b }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('add' as const), b, models: modelMask, cap }) },
  {
    weight: 3,
    arbitrary: fc.record({
      k: fc.constant('metrics' as const),
      b,
      waiting: fc.nat(3),
      running: fc.nat(4),
    }),
  },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('pump' as const) }) },
  {
    weight: 1,
    arbitrary: fc.record({ k: fc.constant('expire' as const), wait: fc.integer({ min: 5, max: 200 }) }),
  },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('policy' as const), p: fc.nat(POLICIES.length - 1) }) },
);

const modelsOf = (mask: number): string[] => MODELS.filter((_, i) => mask & (1 << i));
const spec = (name: string, mask: number, c: number): BackendSpec => ({
  name,
  api: 'openai',
  models: modelsOf(mask),
  maxConcurrency: c,
  weight: 1 + (name.charCodeAt(0) % 3),
});
const show = (ds: readonly Decision[]): string[] =>
  ds.map((d) => `${d.type} ${d.request.id} ${d.type === 'dispatch' ? d.backend : d.reason}`);

/** Runs one event on a scheduler, returning its decisions (errors as a decision-like line). */
function step(
  s: Scheduler | ReferenceScheduler,
  e: Event,
  now: number,
  seq: number,
  pushed: readonly string[],
  queued: readonly string[],
): string[] {
  const name = (i: number): string => NAMES[i]!;
  try {
    switch (e.k) {
      case 'submit': {
        const req: RequestInfo = {
          id: `r${seq}`,
          model: MODELS[e.model]!,
          api: 'openai',
          arrivedAt: now,
          // Long shared prefixes, so the prefix trie matches and may wait for a busy holder; three
          // lengths, so a hold on the request's size (kv-fit-filter) lets a shorter one go.
          promptText: `system prompt ${e.prompt}; `.repeat(20 + 15 * (e.prompt % 3)) + `question ${seq % 2}`,
          ...(e.priority !== undefined ? { priority: e.priority } : {}),
        };
        const ex = new Set(NAMES.filter((_, i) => e.exclude & (1 << i) && e.exclude % 3 === 0));
        return show(s.submit(req, now, ex.size > 0 ? ex : undefined));
      }
      case 'complete': {
        if (pushed.length === 0) return [];
        const id = pushed[e.pick % pushed.length]!;
        return show(s.complete(id, { ok: e.ok, dispatchedAt: now - 1, finishedAt: now }, now));
      }
      case 'cancel': {
        const from = e.queued ? queued : pushed;
        if (from.length === 0) return [];
        const r = s.cancel(from[e.pick % from.length]!, now);
        return [`known ${r.known}`, ...show(r.decisions)];
      }
      case 'health':
        return show(s.setHealth(name(e.b), e.up, now));
      case 'drain':
        return show(s.setDraining(name(e.b), e.on, now));
      case 'cap':
        return show(s.updateBackend(name(e.b), { maxConcurrency: e.cap }, now));
      case 'models':
        return show(s.updateBackend(name(e.b), { models: modelsOf(e.models) }, now));
      case 'remove':
        return show(s.removeBackend(name(e.b), now));
      case 'add':
        s.addBackend(spec(name(e.b), e.models, e.cap));
        return [];
      case 'metrics':
        s.setMetrics(name(e.b), { waiting: e.waiting, running: e.running, kvUsage: 0.5, at: now });
        return [];
      case 'pump':
        return show(s.pump(now));
      case 'expire':
        return show(s.expire(now, e.wait));
      case 'policy':
        return show(s.setPolicy(build(e.p), now));
    }
  } catch (err) {
    return [`error ${(err as Error).message}`];
  }
}

/**
 * Event `seq` on both schedulers: the same decisions as the reference; then `pushed` and `queued`
 * tracked from them the way a host would.
 */
function stepBoth(
  next: Scheduler,
  ref: ReferenceScheduler,
  e: Event,
  now: number,
  seq: number,
  pushed: string[],
  queued: Set<string>,
): void {
  const snapshot = [...pushed];
  const waiting = [...queued];
  const want = step(ref, e, now, seq, snapshot, waiting);
  const got = step(next, e, now, seq, snapshot, waiting);
  assert.deepEqual(got, want, `event ${seq} ${JSON.stringify(e)}`);
  if (e.k === 'submit' && !want.some((l) => l.includes(` r${seq} `))) queued.add(`r${seq}`);
  for (const line of want) {
    const [type, id] = line.split(' ');
    if (type === 'dispatch') {
      queued.delete(id!);
      pushed.push(id!);
    } else if (type === 'reject') queued.delete(id!);
  }
  if (e.k === 'complete' && snapshot.length > 0) pushed.splice(e.pick % snapshot.length, 1);
  if (e.k === 'cancel') {
    const from = e.queued ? waiting : snapshot;
    if (from.length > 0) {
      const id = from[e.pick % from.length]!;
      queued.delete(id);
      const i = pushed.indexOf(id);
      if (i >= 0) pushed.splice(i, 1);
    }
  }
}

/** Random fleets and events under a policy from `policies`: the same decisions as the reference. */
function matchesReference(policies: fc.Arbitrary<number>, numRuns: number, seed: number): void {
  fc.assert(
    fc.property(
      policies,
      fc.array(fc.tuple(modelMask, cap), { minLength: 1, maxLength: NAMES.length }),
      fc.array(fc.tuple(event, fc.nat(20)), { minLength: 30, maxLength: 150, size: 'max' }),
      // Few members sorted up front by a response-ratio walk: small queues go past them too.
      fc.constantFrom(1, 2, 3, 32),
      (p, fleet, events, walk) => {
        const next = new Scheduler({ policy: build(p), maxQueueLength: 40, ratioWalkCandidates: walk });
        const ref = new ReferenceScheduler({ policy: build(p), maxQueueLength: 40 });
        fleet.forEach(([mask, c], i) => {
          next.addBackend(spec(NAMES[i]!, mask, c));
          ref.addBackend(spec(NAMES[i]!, mask, c));
        });
        const pushed: string[] = [];
        const queued = new Set<string>();
        let now = 0;
        events.forEach(([e, dt], seq) => {
          now += dt;
          stepBoth(next, ref, e, now, seq, pushed, queued);
          assert.equal(next.queueLength, ref.queueLength, `queue after event ${seq}`);
          assert.equal(next.queueLength, queued.size);
          assert.equal(next.inFlightTotal, ref.inFlightTotal);
          assert.deepEqual(
            next.backendViews().map((v) => [v.name, v.inFlight, v.healthy, v.draining]),
            ref.backendViews().map((v) => [v.name, v.inFlight, v.healthy, v.draining]),
          );
        });
      },
    ),
    { numRuns, seed },
  );
}

test('the incremental pump decides exactly as rescanning every held request did', () => {
  matchesReference(fc.nat(POLICIES.length - 1), 250, 22);
});

test('held requests a fit gate skips are exactly those the policy would hold again', () => {
  // Policies with Policy.fitGate (kv-fit-filter with backfill, and `fits`): the scheduler asks a
  // held request only once its candidates' bound reaches its size, the reference asks every one.
  const gated = [
    POLICIES.indexOf('fits'),
    POLICIES.findIndex(
      (p) => typeof p === 'object' && p.name === 'workload-aware' && p.params?.backfill !== false,
    ),
  ];
  matchesReference(fc.constantFrom(...gated), 400, 9);
});

test('response-ratio walks over long queues order exactly as sorting every held request', () => {
  // Long queues on one model and slots that free one at a time, sizes that move with each
  // completion, members that join between orderings: the walk's estimates, candidates and bound
  // (RatioWalk) against the reference, which sorts every request by its exact ratio.
  const ratioPolicies = [
    POLICIES.indexOf('ratio'),
    POLICIES.indexOf('ratio-moody'),
    POLICIES.findIndex((p) => typeof p === 'object' && p.name === 'estimated-wait'),
  ];
  const busy: fc.Arbitrary<Event> = fc.oneof(
    {
      weight: 10,
      arbitrary: fc.record({
        k: fc.constant('submit' as const),
        model: fc.constant(0),
        exclude: fc.constant(0),
        prompt: fc.nat(5),
        // A band above the rest now and then: its members ordered apart, before the others.
        priority: fc.constantFrom(undefined, undefined, undefined, 1),
      }),
    },
    {
      weight: 5,
      arbitrary: fc.record({ k: fc.constant('complete' as const), pick: fc.nat(), ok: fc.boolean() }),
    },
    {
      weight: 3,
      arbitrary: fc.record({
        k: fc.constant('metrics' as const),
        b: fc.nat(1),
        waiting: fc.nat(2),
        running: fc.nat(3),
      }),
    },
    { weight: 1, arbitrary: fc.record({ k: fc.constant('pump' as const) }) },
    {
      weight: 1,
      arbitrary: fc.record({ k: fc.constant('cancel' as const), pick: fc.nat(), queued: fc.constant(true) }),
    },
    // Another policy: every size is asked again (its epochs start over).
    {
      weight: 1,
      arbitrary: fc.record({ k: fc.constant('policy' as const), p: fc.constantFrom(...ratioPolicies) }),
    },
  );
  fc.assert(
    fc.property(
      fc.constantFrom(...ratioPolicies),
      fc.array(fc.tuple(busy, fc.nat(400)), { minLength: 100, maxLength: 400 }),
      fc.constantFrom(1, 2, 4, 8),
      (p, events, walk) => {
        const next = new Scheduler({ policy: build(p), ratioWalkCandidates: walk });
        const ref = new ReferenceScheduler({ policy: build(p) });
        for (const s of [next, ref]) {
          s.addBackend(spec('a', 1, 2));
          s.addBackend(spec('b', 1, 1));
        }
        const pushed: string[] = [];
        const queued = new Set<string>();
        let now = 0;
        events.forEach(([e, dt], seq) => {
          now += dt;
          stepBoth(next, ref, e, now, seq, pushed, queued);
          assert.equal(next.queueLength, ref.queueLength, `queue after event ${seq}`);
        });
      },
    ),
    { numRuns: 120, seed: 5 },
  );
});
