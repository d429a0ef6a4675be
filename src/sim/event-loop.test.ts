/**
 * The simulator's one event loop with a bare host: same-instant order by kind, the opening cursor
 * ahead of heap sends, periodic events that stop once idle, the cut at endS, and engine finishes
 * handed over at their instant, lazily woken or not.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defaultProfile } from '../engine/profile.js';
import type { ScenarioBackend } from '../scenario/types.js';
import type { ScheduledRequest, WorkloadRequest } from '../workloads/types.js';
import { openRequest } from './ledger.js';
import { EventLoop, PROBE, SAMPLE, SEND, TIMEOUT, type LoopEvent, type LoopHost } from './event-loop.js';

interface Ev extends LoopEvent {
  readonly request?: WorkloadRequest;
  readonly tag?: string;
}

const backend: ScenarioBackend = {
  name: 'e',
  // One iteration = 1 s, nothing else costs.
  profile: defaultProfile({
    slots: 1,
    speed: 1,
    baseStepS: 1,
    perSeqS: 0,
    perTokenS: 0,
    prefillPerTokenS: 0,
    prefixCacheBlocks: 0,
  }),
  models: ['m'],
  maxConcurrency: Infinity,
  weight: 1,
};

const wreq = (id: string, outputTokens = 1): WorkloadRequest => ({
  id,
  model: 'm',
  api: 'ollama-generate',
  prompt: 'x',
  outputTokens,
});
const at = (t: number, id: string, outputTokens = 1): ScheduledRequest => ({
  at: t,
  request: wreq(id, outputTokens),
});

/** A host that logs what happens and sends every request straight to engine 0. */
function logHost(loop: EventLoop<Ev>, log: string[], held: { n: number }): LoopHost<Ev> {
  let index = 0;
  const send = (r: WorkloadRequest): void => {
    log.push(`send ${r.id} @${loop.now}`);
    const o = openRequest(r, loop.now, index++);
    held.n++;
    loop.submit(o, 0, loop.fleet.prepare(o, 0, 'e', loop.now));
  };
  return {
    open: send,
    handle: (ev) => (ev.kind === SEND ? send(ev.request!) : log.push(`${ev.tag} @${loop.now}`)),
    finished: (_i, e) => {
      held.n--;
      log.push(`finish ${e.id} @${e.t} (now ${loop.now})`);
    },
    busy: () => held.n > 0,
  };
}

for (const lazy of [false, true]) {
  test(`same-instant order and finishes at their instant (lazy wakes ${lazy})`, () => {
    const loop = new EventLoop<Ev>([backend], { seed: 1, durationS: 100, endS: 200, lazy });
    const log: string[] = [];
    const held = { n: 0 };
    const host = logHost(loop, log, held);
    // Pushed in reverse priority order at t = 5: the heap must run them SEND, TIMEOUT, probe.
    loop.heap.push(5, TIMEOUT, { kind: TIMEOUT, tag: 'timeout' });
    loop.schedule([at(5, 'heap-send'), at(150, 'too-late')], (it) => ({ kind: SEND, request: it.request }));
    const opening = [at(0, 'a', 3), at(5, 'cursor-send')];
    loop.setOpening(() => opening.shift());
    let ticks = 0;
    loop.every(PROBE, { every: 5, run: () => log.push(`probe ${ticks++} @${loop.now}`) });
    const cut = loop.run(host);
    assert.equal(cut, false);
    assert.deepEqual(log, [
      'send a @0',
      'probe 0 @0',
      'finish a @3 (now 3)',
      'send cursor-send @5',
      'send heap-send @5',
      'timeout @5',
      'probe 1 @5',
      'finish cursor-send @6 (now 6)',
      // One slot: heap-send waits for cursor-send's iteration.
      'finish heap-send @7 (now 7)',
      // Nothing pending after 7: the probe at 10 is the last.
      'probe 2 @10',
    ]);
    assert.equal(loop.lastActivity, 7);
    assert.equal(loop.active(), false);
  });
}

test('a run with events past endS is cut off there, lazy engines caught up to it', () => {
  const loop = new EventLoop<Ev>([backend], { seed: 1, durationS: 10, endS: 20, lazy: true });
  const log: string[] = [];
  const held = { n: 0 };
  loop.setOpening(
    (
      (list) => () =>
        list.shift()
    )([at(0, 'long', 100)]),
  );
  loop.every(SAMPLE, { every: 4, run: () => log.push(`sample @${loop.now}`) });
  const cut = loop.run(logHost(loop, log, held));
  assert.equal(cut, true);
  assert.equal(held.n, 1);
  assert.deepEqual(log, ['send long @0', ...[0, 4, 8, 12, 16, 20].map((t) => `sample @${t}`)]);
  loop.catchUpToEnd();
  assert.equal(loop.now, 20);
  // Caught up: its iterations up to 20 have run (one per second), the one after still to end.
  assert.ok(loop.fleet.engines[0]!.iterationEnd! > 20);
});
