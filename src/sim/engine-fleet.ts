/**
 * The simulated fleet (issue #31: one simulator): the scenario's engines, their wakes on the run's
 * event heap, dispatch of a routed request onto an engine, probes, queue samples and prefix-cache
 * statistics. Shared by every router node of a run: one router (simulator.ts) is the one-node case
 * of several (federation.ts).
 */
import { createRng, deriveSeed } from '../core/rng.js';
import type { EngineCacheInfo, EngineMetrics, RequestInfo } from '../core/types.js';
import { EngineModel } from '../engine/model.js';
import { slotCacheInfo } from '../engine/slot-cache.js';
import { contextBlockHashes, countTokens, outputText, promptBlockHashes } from '../engine/tokens.js';
import type { ScenarioBackend } from '../scenario/types.js';
import { engineBlockHashes } from '../workloads/trace-blocks.js';
import type { WorkloadRequest } from '../workloads/types.js';
import type { EventHeap } from './event-heap.js';
import type { RequestRecord } from './ledger.js';

/** wakeAt of an engine without a live wake (times are >= 0). */
export const NO_WAKE = -1;

/** Block hashes of a prompt on an engine without a prefix cache: none, one shared array. */
const NO_HASHES: readonly number[] = Object.freeze([]);

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

export function newMetrics(): Mutable<EngineMetrics> {
  return { running: 0, waiting: 0, kvUsage: 0, at: 0 };
}

/** A request as the core sees it, with what the fleet needs to run it (the ledger's entry). */
export interface OpenRequest extends RequestInfo {
  readonly req: WorkloadRequest;
  readonly rec: RequestRecord;
  /** Its index in the run's records, the engine sequence's ref. */
  readonly index: number;
  /** Engine index once dispatched (-1 before). */
  engine: number;
  /** The answer's text, drawn at dispatch when the engine caches prefixes ('' otherwise). */
  answer: string;
}

export class EngineFleet<E> {
  readonly engines: EngineModel[];
  readonly byName = new Map<string, number>();
  /** Per engine: requests pushed to it and not finished. */
  readonly outstanding: number[];
  /** Per engine, its live wake's time; NO_WAKE: none. Unboxed doubles (no allocation per store). */
  readonly wakeAt: Float64Array;
  /** Engines with a live wake. */
  liveWakes = 0;
  /** Engines touched at this instant; their next wake is set once the instant is over. */
  readonly dirty: boolean[];
  // A fixed array and a count: emptying an array by `length = 0` reallocates it on the next push.
  readonly dirtyList: number[];
  dirtyCount = 0;
  /** One constant wake event per engine (no allocation per iteration). */
  private readonly wakeEvents: E[];
  /** Per backend, the metrics object refilled per probe (see probe). */
  private readonly metrics: Mutable<EngineMetrics>[];
  /** Per engine, the cache size it reports (slot caches only; see metricsOf). */
  private readonly cacheInfo: (EngineCacheInfo | undefined)[];

  constructor(
    readonly specs: readonly ScenarioBackend[],
    private readonly heap: EventHeap<E>,
    /** The heap priority of engine wakes, and the wake event of engine i. */
    private readonly wakePriority: number,
    wakeEvent: (i: number) => E,
    private readonly seed: number,
  ) {
    // Token events are only for streaming; TTFT comes with 'finished' (queuedS + prefillS).
    // Ids are unique here (one record each) and only client timeouts cancel: no id index.
    this.engines = specs.map(
      (b) => new EngineModel(b.profile, { tokenEvents: false, admitEvents: false, indexById: false }),
    );
    specs.forEach((b, i) => this.byName.set(b.name, i));
    const n = specs.length;
    this.outstanding = new Array<number>(n).fill(0);
    this.wakeAt = new Float64Array(n).fill(NO_WAKE);
    this.dirty = new Array<boolean>(n).fill(false);
    this.dirtyList = new Array<number>(n).fill(0);
    this.wakeEvents = specs.map((_, i) => wakeEvent(i));
    this.metrics = specs.map(newMetrics);
    this.cacheInfo = specs.map(({ profile: p }) => {
      const info = slotCacheInfo(p);
      return info && { tokens: info.tokens, slots: info.slots };
    });
  }

  touch(i: number): void {
    if (this.dirty[i]) return;
    this.dirty[i] = true;
    this.dirtyList[this.dirtyCount++] = i;
  }

  /**
   * Keep one live wake per engine at its next iteration end (`lazy`: only where its next iteration
   * may finish, admit or preempt, within `maxQuiet` iterations). Deferred to the end of the instant
   * so requests submitted at the same virtual time batch into the same iteration.
   */
  flush(lazy: boolean, maxQuiet: number): void {
    const { dirty, dirtyList, engines, wakeAt } = this;
    for (let k = 0; k < this.dirtyCount; k++) {
      const i = dirtyList[k]!;
      dirty[i] = false;
      const t = lazy ? engines[i]!.quietUntil(maxQuiet) : engines[i]!.nextEventTime();
      const w = t ?? NO_WAKE;
      if (w === wakeAt[i]) continue;
      if (wakeAt[i] === NO_WAKE) this.liveWakes++;
      if (w === NO_WAKE) this.liveWakes--;
      wakeAt[i] = w;
      if (w !== NO_WAKE) this.heap.push(w, this.wakePriority, this.wakeEvents[i]!);
    }
    this.dirtyCount = 0;
  }

  /** A wake of engine i is being processed: it has none live until the next flush. */
  woken(i: number): void {
    this.wakeAt[i] = NO_WAKE;
    this.liveWakes--;
    this.touch(i);
  }

  /**
   * Size `o` for engine i and record its dispatch (prompt and output tokens, block hashes, the
   * answer a cached engine keeps); the caller submits it (after bringing a lazy engine up to now).
   */
  prepare(o: OpenRequest, i: number, backend: string, now: number): SubmitArgs {
    const req = o.req;
    const profile = this.specs[i]!.profile;
    const promptTokens = req.promptTokens ?? countTokens(o.promptText);
    const cap = req.maxTokens;
    const outputTokens = Math.max(1, cap !== undefined ? Math.min(req.outputTokens, cap) : req.outputTokens);
    o.rec.dispatchS = now;
    o.rec.backend = backend;
    o.rec.promptTokens = promptTokens;
    o.engine = i;
    this.outstanding[i]!++;
    // No cache, no lookups: skip hashing (and report no hit rate rather than a false 0). With a
    // cache, the answer is drawn now so the engine can cache its blocks at the finish, and the
    // client resends exactly that text in a follow-up.
    const caching = profile.prefixCacheBlocks > 0;
    // A trace request known by its blocks (stand-in text) has its engine hashes from them, and
    // no answer to cache: its client, a trace, resends whatever the trace says.
    const blocks = req.prefixBlocks;
    const blockHashes = !caching
      ? NO_HASHES
      : blocks
        ? engineBlockHashes(blocks, promptTokens, req.tailState ?? 0, profile.blockSize)
        : promptBlockHashes(o.promptText, profile.blockSize);
    if (caching && !blocks)
      o.answer = outputText(createRng(deriveSeed(this.seed, `answer:${req.id}`)), outputTokens);
    return {
      promptTokens,
      outputTokens,
      blockHashes,
      context: caching && !blocks,
    };
  }

  /** Submit what prepare sized to engine i at `now`. */
  submit(o: OpenRequest, i: number, a: SubmitArgs, now: number): void {
    const profile = this.specs[i]!.profile;
    this.engines[i]!.submit(
      {
        id: o.req.id,
        promptTokens: a.promptTokens,
        blockHashes: a.blockHashes,
        outputTokens: a.outputTokens,
        contextBlockHashes: a.context
          ? contextBlockHashes(o.promptText, a.blockHashes, o.answer, profile.blockSize)
          : undefined,
        ref: o.index,
        model: o.req.model,
      },
      now,
    );
    this.touch(i);
  }

  /** Take `o` off its engine (the client gave up). */
  cancel(o: OpenRequest, now: number): void {
    this.engines[o.engine]!.cancel(o.id, now);
    this.outstanding[o.engine]!--;
    this.touch(o.engine);
  }

  /**
   * Engine i's load as a probe or scrape reads it. `reuse`: the backend's one metrics object,
   * refilled (for policies that keep none; a new object boxes each double).
   */
  metricsOf(i: number, now: number, reuse: boolean): EngineMetrics {
    const e = this.engines[i]!;
    const m = reuse ? this.metrics[i]! : newMetrics();
    m.running = e.batchSize;
    m.waiting = e.queueLength;
    m.kvUsage = e.kvUsage;
    m.at = now * 1000;
    // Slot caches say their size (llama.cpp's /props, as the emulated engine serves it); block
    // caches report none (the emulated engine publishes no vllm:cache_config_info).
    const cache = this.cacheInfo[i];
    if (cache !== undefined) m.cache = cache;
    return m;
  }

  /** Append one queue sample per backend at `now`. */
  sample(now: number, samples: QueueSample[]): void {
    for (let i = 0; i < this.engines.length; i++) {
      const e = this.engines[i]!;
      samples.push({
        t: now,
        backend: this.specs[i]!.name,
        outstanding: this.outstanding[i]!,
        engineWaiting: e.queueLength,
        running: e.batchSize,
      });
    }
  }

  /** Requests the engines hold (running + waiting). */
  held(): number {
    let n = 0;
    for (const e of this.engines) {
      const s = e.stats();
      n += s.running + s.waiting;
    }
    return n;
  }

  /** Prefix-cache statistics per backend, as a run reports them. */
  backendStats(): { name: string; prefixQueries: number; prefixHits: number }[] {
    return this.specs.map((b, i) => {
      const s = this.engines[i]!.stats();
      return { name: b.name, prefixQueries: s.prefixCacheQueries, prefixHits: s.prefixCacheHits };
    });
  }
}

export interface SubmitArgs {
  readonly promptTokens: number;
  readonly outputTokens: number;
  readonly blockHashes: readonly number[];
  /** Pass the prompt-plus-answer context hashes (a cached engine, a request with text). */
  readonly context: boolean;
}

/** One sample of a backend's queues. */
export interface QueueSample {
  readonly t: number;
  readonly backend: string;
  /** Requests pushed to it and not finished (engine running + waiting). */
  readonly outstanding: number;
  /** Waiting inside the engine (not yet admitted: no slot or no KV room). */
  readonly engineWaiting: number;
  /** In the engine's running batch. */
  readonly running: number;
}
