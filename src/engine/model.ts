/**
 * The engine model (design §3), iteration by iteration. Pure: no timers, no clock, no I/O — the
 * caller says what time it is (seconds of model time). The emulated HTTP engine drives it in real
 * time, the simulator in virtual time, so both batch and time steps identically.
 *
 * One iteration:
 *  1. at its start, admit waiting sequences FIFO while the batch has a free slot and the KV fits;
 *  2. it lasts (base + perSeq·running + perToken·context + prefillPerToken·uncachedAdmitted) / speed;
 *  3. at its end every running sequence has one more token (a newly admitted sequence's first token
 *     ends its prefill: that instant is its TTFT); a sequence with all its tokens finishes and frees
 *     its KV. The next iteration starts at once if anything is running or admissible.
 *
 * KV accounting: a running sequence holds promptTokens + generated + 1 (the +1 is the token the
 * current iteration is computing; reserved at admission as promptTokens + 1). Admission checks the
 * reservation only, so a batch may grow past capacity while decoding: we let it (no preemption or
 * swapping — real engines would preempt; modelling that is not worth its cost here), and kvUsage is
 * reported clamped to 1. A sequence whose prompt alone exceeds capacity is admitted when the batch is
 * empty, so it cannot deadlock the queue. Admission is strictly FIFO (head-of-line blocking, like
 * vLLM's FCFS scheduler).
 *
 * Prefix cache: counted in BLOCKS. Each admission queries all of the sequence's full blocks
 * (prefixCacheQueries += blockHashes.length) and hits the longest cached prefix of them
 * (prefixCacheHits += matched). cachedTokens = matched·blockSize, capped at promptTokens − 1 so at
 * least one token is prefilled. The blocks are inserted (touched) right after admission. A sequence
 * that carries contextBlockHashes (its prompt + answer) has those inserted too when it finishes:
 * real engines keep the KV of generated tokens (vLLM v1 caches every full block, SGLang inserts the
 * whole sequence into its radix tree), so a follow-up that resends the answer hits it.
 *
 * With `pagedKv` (vLLM / SGLang paged KV): a running sequence's full prompt blocks are
 * shared — referenced, one physical copy however many sequences use them — and only its partial
 * last block and generated tokens are its own. Admission needs room for the blocks nobody holds
 * yet plus its own tokens. The prefix cache then holds only unreferenced blocks (a block joins it
 * when its last user finishes) and only in the room the batch leaves, at most prefixCacheBlocks:
 * a busy engine keeps little cache, so a request that waits long may find its prefix evicted.
 * Hits count blocks found referenced or cached. Step cost is unchanged: attention still reads every
 * sequence's whole context. And when decoding outgrows the pool, the most recently admitted
 * sequences are preempted (vLLM's recompute): their KV is freed, they go back to the head of the
 * waiting queue, and on readmission prefill their prompt and what they had generated again (the
 * prompt's blocks may still be cached) before generating on. Without pagedKv a batch may outgrow
 * the pool unpunished (see KV accounting above).
 *
 * Why one file of ~900 lines: one iteration is the unit, and admission, KV accounting, chunked
 * prefill, prefix-cache credit, preemption and LoRA slots all read and write the same sequence
 * records and pool counters within it — splitting them would spread one step's arithmetic over
 * files and make the simulator's and the emulated engine's shared timing harder to check. The
 * parts with state of their own are apart: the prefix cache (`prefix-cache.ts`), the profiles
 * (`profile.ts`, `types.ts`), the real-time driver (`driver.ts`).
 */
import { PrefixCache } from './prefix-cache.js';
import { SlotCache, slotCacheInfo } from './slot-cache.js';
import type { BlockHash } from './tokens.js';
import type { EngineEvent, EngineProfile, EngineSequence, EngineStats, LoraInfo } from './types.js';

export interface EngineModelOptions {
  /**
   * Emit a 'tokens' event per running sequence per iteration (default true). The HTTP engine needs
   * them to stream; a simulator that only needs TTFT and completion can turn them off (the first
   * token time is in 'finished' as queuedS + prefillS after submit).
   */
  readonly tokenEvents?: boolean;
  /** Emit an 'admitted' event per admission (default true; the simulator reads only 'finished'). */
  readonly admitEvents?: boolean;
  /**
   * Keep an index of live sequences by id (default true): submit refuses a duplicate id and cancel
   * finds its sequence at once. false, for a host whose ids are unique by construction and that
   * rarely cancels (the simulator): no index to maintain per sequence, cancel searches.
   */
  readonly indexById?: boolean;
}

const WAITING = 0;
const RUNNING = 1;
const GONE = 2;

/** Mutable per-sequence state; one object per submit, reused through its life. */
interface Seq {
  readonly id: string;
  readonly ref: number;
  readonly promptTokens: number;
  readonly outputTokens: number;
  /**
   * Without pagedKv only admission reads them: dropped then (NO_HASHES), so a long prompt's
   * hashes die young instead of living as long as the sequence runs.
   */
  blockHashes: readonly BlockHash[];
  /** Prompt + answer blocks to cache at the finish (EngineSequence.contextBlockHashes). */
  readonly contextHashes: readonly BlockHash[] | undefined;
  readonly submitT: number;
  state: number;
  admitT: number;
  firstTokenT: number;
  /** pagedKv: KV tokens that are the sequence's own (partial block, generated, +1). */
  own: number;
  /** pagedKv: it was preempted; set while it waits to be readmitted. */
  preempted: boolean;
  cachedTokens: number;
  /** Tokens generated, as of `mark` while running (see EngineModel.quietSteps). */
  generated: number;
  /** While running: the engine's quietSteps when `generated` and `own` were last brought up to date. */
  mark: number;
  /** 'stall' / 'chunked': prompt (or recompute) tokens still to prefill. */
  prefillLeft: number;
  /** 'stall' / 'chunked': it generates a token at the end of the iteration in progress. */
  emits: boolean;
  /** LoRA: the adapter it runs on; undefined: the base model. */
  readonly adapter: string | undefined;
  /** cacheMode 'slots': the slot it runs in (-1: none). */
  cacheSlot: number;
}

/** Throws a RangeError naming the first field that cannot describe an engine. */
export function validateProfile(p: EngineProfile): void {
  const positive = ['slots', 'kvCapacityTokens', 'speed', 'blockSize'] as const;
  const nonNegative = ['baseStepS', 'perSeqS', 'perTokenS', 'prefillPerTokenS', 'prefixCacheBlocks'] as const;
  for (const k of positive) {
    if (!(Number.isFinite(p[k]) && p[k] > 0)) throw new RangeError(`engine profile: ${k} must be > 0`);
  }
  for (const k of nonNegative) {
    if (!(Number.isFinite(p[k]) && p[k] >= 0)) throw new RangeError(`engine profile: ${k} must be >= 0`);
  }
  const mode = p.prefillMode;
  if (mode !== undefined && mode !== 'mixed' && mode !== 'stall' && mode !== 'chunked')
    throw new RangeError('engine profile: prefillMode must be mixed, stall or chunked');
  const budget = p.maxBatchedTokens;
  if (budget !== undefined && !(Number.isInteger(budget) && budget > 0))
    throw new RangeError('engine profile: maxBatchedTokens must be an integer > 0');
  const cacheMode = p.cacheMode;
  if (cacheMode !== undefined && cacheMode !== 'blocks' && cacheMode !== 'slots')
    throw new RangeError('engine profile: cacheMode must be blocks or slots');
  if (cacheMode === 'slots' && p.pagedKv === true)
    throw new RangeError('engine profile: cacheMode slots does not share blocks (pagedKv must be off)');
  const lora = p.lora;
  if (lora !== undefined) {
    if (!(Number.isInteger(lora.maxLora) && lora.maxLora > 0))
      throw new RangeError('engine profile: lora.maxLora must be an integer > 0');
    if (!(Number.isFinite(lora.swapS) && lora.swapS >= 0))
      throw new RangeError('engine profile: lora.swapS must be >= 0');
  }
}

const NO_HASHES: readonly BlockHash[] = Object.freeze([]);

/** advance()'s answer when nothing happened: one shared, frozen empty array (no allocation). */
const NO_EVENTS = Object.freeze([]) as unknown as EngineEvent[];

/** vLLM's max_num_batched_tokens default with chunked prefill enabled. */
const DEFAULT_CHUNK_BUDGET = 512;

export class EngineModel {
  private readonly p: EngineProfile;
  private readonly tokenEvents: boolean;
  private readonly admitEvents: boolean;
  private readonly cache: PrefixCache;
  /** cacheMode 'slots': the slots' kept prompts, in place of `cache` (undefined: the block LRU). */
  private readonly slotCache: SlotCache | undefined;
  /** Live sequences by id; undefined without indexById. */
  private readonly byId: Map<string, Seq> | undefined;
  /** FIFO of waiting sequences from `waitHead`; cancelled entries are skipped lazily. */
  private waitQ: Seq[] = [];
  private waitHead = 0;
  private waitingCount = 0;
  /** The batch, in admission order. */
  private readonly running: Seq[] = [];
  /** Sum over running of promptTokens + generated + 1. */
  private kvUsed = 0;
  private readonly sharing: boolean;
  /** 0 mixed, 1 stall, 2 chunked (see EngineProfile.prefillMode). */
  private readonly mode: number;
  private readonly chunkBudget: number;
  /** pagedKv: running sequences using each shared prompt block. */
  private readonly refs = new Map<BlockHash, number>();
  /** pagedKv: sum over running of their own tokens (see Seq.own). */
  private ownTokens = 0;
  private preemptions = 0;
  /** LoRA: the profile's adapters (undefined: no LoRA, every path below as without it). */
  private readonly adapters: ReadonlySet<string> | undefined;
  private readonly maxLora: number;
  private readonly swapS: number;
  /**
   * LoRA: adapters holding a slot → running sequences using them, least recently admitted first
   * (an admission moves its adapter to the end). At most maxLora entries.
   */
  private readonly slots = new Map<string, number>();
  private loraLoads = 0;
  /** LoRA: load time the iteration being started pays (its admissions' swaps), s. */
  private swapDue = 0;
  /**
   * Quiet steps run so far: in each, every running sequence generated a token. quietRun counts
   * them here rather than touching each sequence; a running sequence's true generated (and own)
   * is its own count plus the steps since its `mark` (sync() adds them).
   */
  private quietSteps = 0;
  /**
   * Bumped whenever the batch changes otherwise than by quiet steps (admission, a finish, a
   * preemption, a cancel, new prefill flags): the quiet plan below is valid while it stays put.
   */
  private batchStamp = 0;
  /** 'stall': some running sequence's decode waits out the prefill step in progress (emits false). */
  private someHeld = false;
  /** The quiet plan: what quietRun and quietUntil need of the batch, computed once per change. */
  private planStamp = -1;
  /** Every running sequence emits at the end of the iteration in progress. */
  private planEmit = false;
  /** Every running sequence has its first token. */
  private planStarted = false;
  /** quietSteps at which the first running sequence will have all its tokens. */
  private planFinish = 0;
  // Plain numbers with a flag / Infinity for "none", never undefined: a field that may hold
  // undefined boxes every time stored into it (a heap number each), and these change per iteration.
  /** An iteration is in progress. */
  private busy = false;
  /** End time of the iteration in progress (while busy). */
  private iterEnd = 0;
  /** When idle: when the next iteration may start (the earliest waiting submit; Infinity: none). */
  private pendingStart = Infinity;
  /** Events of an iteration started outside advance() (from nextEventTime), handed out by the next advance(). */
  private pendingEvents: EngineEvent[] = [];
  /** advance()'s event buffer, empty between calls. */
  private readonly scratch: EngineEvent[] = [];
  /** release()'s blocks to cache, empty between calls. */
  private readonly freed: BlockHash[] = [];
  private queries = 0;
  private hits = 0;
  private completed = 0;
  private generatedTotal = 0;
  private promptTotal = 0;

  constructor(profile: EngineProfile, options: EngineModelOptions = {}) {
    validateProfile(profile);
    this.p = profile;
    this.tokenEvents = options.tokenEvents ?? true;
    this.admitEvents = options.admitEvents ?? true;
    this.byId = options.indexById === false ? undefined : new Map<string, Seq>();
    this.cache = new PrefixCache(Math.floor(profile.prefixCacheBlocks));
    this.slotCache = slotCacheInfo(profile) !== undefined ? new SlotCache(profile.slots) : undefined;
    this.sharing = profile.pagedKv === true;
    this.mode = profile.prefillMode === 'stall' ? 1 : profile.prefillMode === 'chunked' ? 2 : 0;
    this.chunkBudget = profile.maxBatchedTokens ?? DEFAULT_CHUNK_BUDGET;
    const lora = profile.lora;
    this.adapters = lora ? new Set(lora.adapters ?? []) : undefined;
    this.maxLora = lora?.maxLora ?? 0;
    this.swapS = lora?.swapS ?? 0;
  }

  /** LoRA: whether `s` may join the batch now as far as adapter slots go. */
  private slotFor(s: Seq): boolean {
    const a = s.adapter;
    if (a === undefined || this.slots.has(a) || this.slots.size < this.maxLora) return true;
    for (const n of this.slots.values()) if (n === 0) return true;
    return false;
  }

  /** LoRA: `s` joins the batch: its adapter's slot (loading it, evicting the LRU idle one, if need be). */
  private acquire(s: Seq): void {
    const a = s.adapter;
    if (a === undefined) return;
    const n = this.slots.get(a);
    if (n !== undefined) {
      this.slots.delete(a);
      this.slots.set(a, n + 1);
      return;
    }
    if (this.slots.size >= this.maxLora) {
      for (const [name, users] of this.slots) {
        if (users === 0) {
          this.slots.delete(name);
          break;
        }
      }
    }
    this.slots.set(a, 1);
    this.loraLoads++;
    this.swapDue += this.swapS;
  }

  /** LoRA: `s` left the batch; its adapter stays loaded (idle once nobody uses it). */
  private releaseSlot(s: Seq): void {
    const a = s.adapter;
    if (a === undefined) return;
    const n = this.slots.get(a);
    if (n !== undefined) this.slots.set(a, n - 1);
  }

  /**
   * LoRA: the first waiting sequence (in queue order) whose adapter can run now, or the first one
   * submitted after `t` (the caller stops there); undefined when every waiting one is blocked.
   */
  private loraHead(t: number): Seq | undefined {
    const first = this.head();
    if (!first || first.submitT > t || this.slotFor(first)) return first;
    const q = this.waitQ;
    for (let i = this.waitHead + 1; i < q.length; i++) {
      const s = q[i]!;
      if (s.state !== WAITING) continue;
      if (s.submitT > t || this.slotFor(s)) return s;
    }
    return undefined;
  }

  /** Take `s` (from loraHead or head) off the waiting queue. */
  private take(s: Seq): void {
    const q = this.waitQ;
    if (q[this.waitHead] === s) this.waitHead++;
    else q.splice(q.indexOf(s, this.waitHead), 1);
    this.waitingCount--;
  }

  /** KV tokens physically in use: the batch's reservations, shared blocks counted once. */
  private physicalKv(): number {
    return this.sharing ? this.refs.size * this.p.blockSize + this.ownTokens : this.kvUsed;
  }

  /** Add to a running sequence the quiet steps since its mark. */
  private sync(s: Seq): void {
    const d = this.quietSteps - s.mark;
    if (d === 0) return;
    s.generated += d;
    if (this.sharing) s.own += d;
    s.mark = this.quietSteps;
  }

  /** The quiet plan of the batch as it is (one pass; see planStamp). */
  private plan(): void {
    const run = this.running;
    let left = Infinity;
    let emit = true;
    let started = true;
    for (let i = 0; i < run.length; i++) {
      const s = run[i]!;
      if (!s.emits) emit = false;
      const generated = s.generated + (this.quietSteps - s.mark);
      if (generated === 0) started = false;
      const l = s.outputTokens - generated;
      if (l < left) left = l;
    }
    this.planEmit = emit;
    this.planStarted = started;
    this.planFinish = this.quietSteps + left;
    this.planStamp = this.batchStamp;
  }

  /** KV tokens admitting `s` now would add. */
  private kvNeed(s: Seq): number {
    if (!this.sharing) return s.promptTokens + 1;
    let fresh = 0;
    const hashes = s.blockHashes;
    for (let i = 0; i < hashes.length; i++) if (!this.refs.has(hashes[i]!)) fresh++;
    return fresh * this.p.blockSize + this.ownAtAdmission(s);
  }

  private ownAtAdmission(s: Seq): number {
    return Math.max(0, s.promptTokens - s.blockHashes.length * this.p.blockSize) + s.generated + 1;
  }

  /**
   * pagedKv: while the batch overflows the pool, preempt its most recently admitted sequence (never
   * the last one left) back to the head of the waiting queue, to be recomputed.
   */
  private preemptOverflow(): void {
    const run = this.running;
    while (run.length > 1 && this.physicalKv() > this.p.kvCapacityTokens) {
      const s = run.pop()!;
      this.sync(s);
      this.batchStamp++;
      this.kvUsed -= s.promptTokens + s.generated + 1;
      this.release(s);
      this.releaseSlot(s);
      s.state = WAITING;
      s.preempted = true;
      this.preemptions++;
      if (this.waitHead > 0) this.waitQ[--this.waitHead] = s;
      else this.waitQ.unshift(s);
      this.waitingCount++;
    }
  }

  /** pagedKv: a sequence starts using its prompt's blocks (cached ones stop being evictable). */
  private hold(hashes: readonly BlockHash[]): void {
    for (let i = 0; i < hashes.length; i++) {
      const h = hashes[i]!;
      const n = this.refs.get(h);
      if (n !== undefined) this.refs.set(h, n + 1);
      else {
        this.cache.delete(h);
        this.refs.set(h, 1);
      }
    }
  }

  /**
   * pagedKv: the sequence stops using its shared blocks; unused ones become cache. A finished one
   * passes `context`, its prompt + answer blocks: its generated tokens' KV is kept too, and what no
   * running sequence holds of it becomes cache (in chain order, so LRU eats it from the tail).
   */
  private release(s: Seq, context?: readonly BlockHash[]): void {
    this.ownTokens -= s.own;
    const freed = this.freed;
    const hashes = s.blockHashes;
    for (let i = 0; i < hashes.length; i++) {
      const h = hashes[i]!;
      const n = this.refs.get(h)!;
      if (n > 1) this.refs.set(h, n - 1);
      else {
        this.refs.delete(h);
        if (context === undefined) freed.push(h);
      }
    }
    if (context !== undefined)
      for (let i = 0; i < context.length; i++) if (!this.refs.has(context[i]!)) freed.push(context[i]!);
    if (freed.length > 0) {
      this.cache.insert(freed);
      freed.length = 0;
    }
    this.trimCache();
  }

  /** pagedKv: the cache keeps only what fits beside the batch. */
  private trimCache(): void {
    const room = Math.floor((this.p.kvCapacityTokens - this.physicalKv()) / this.p.blockSize);
    this.cache.evictTo(Math.max(0, room));
  }

  get profile(): EngineProfile {
    return this.p;
  }

  /** Queue a sequence at time `now`. Submits must come in non-decreasing time; ids must be unique among live sequences. */
  submit(seq: EngineSequence, now: number): void {
    if (this.byId?.has(seq.id)) throw new Error(`engine model: duplicate sequence id ${seq.id}`);
    const s: Seq = {
      id: seq.id,
      ref: seq.ref ?? -1,
      promptTokens: Math.max(0, Math.floor(seq.promptTokens)),
      outputTokens: Math.max(1, Math.floor(seq.outputTokens)),
      blockHashes: seq.blockHashes,
      contextHashes: seq.contextBlockHashes,
      submitT: now,
      state: WAITING,
      admitT: 0,
      firstTokenT: 0,
      own: 0,
      preempted: false,
      cachedTokens: 0,
      generated: 0,
      mark: 0,
      prefillLeft: 0,
      emits: true,
      adapter: this.adapters?.has(seq.model ?? '') === true ? seq.model : undefined,
      cacheSlot: -1,
    };
    this.byId?.set(s.id, s);
    this.waitQ.push(s);
    this.waitingCount++;
    // Idle: the next iteration starts at this submit (lazily, so same-instant submits batch together).
    if (!this.busy) this.pendingStart = Math.min(this.pendingStart, now);
  }

  /**
   * Remove a waiting or running sequence and free its slot and KV; false if unknown (or already
   * finished). An iteration in progress keeps its end time (its cost is already spent).
   */
  cancel(id: string, _now: number): boolean {
    const s = this.byId ? this.byId.get(id) : this.find(id);
    if (!s) return false;
    this.byId?.delete(id);
    if (s.state === WAITING) {
      this.waitingCount--;
    } else if (s.state === RUNNING) {
      this.sync(s);
      this.batchStamp++;
      const i = this.running.indexOf(s);
      if (i >= 0) this.running.splice(i, 1);
      this.kvUsed -= s.promptTokens + s.generated + 1;
      if (this.sharing) this.release(s);
      else if (this.slotCache !== undefined) this.slotCache.release(s.cacheSlot);
      this.releaseSlot(s);
    }
    s.state = GONE;
    return true;
  }

  /** The live sequence `id` without the index: in the batch, else waiting. */
  private find(id: string): Seq | undefined {
    const run = this.running;
    for (let i = 0; i < run.length; i++) if (run[i]!.id === id) return run[i];
    const q = this.waitQ;
    for (let i = this.waitHead; i < q.length; i++)
      if (q[i]!.state === WAITING && q[i]!.id === id) return q[i];
    return undefined;
  }

  /** End time of the iteration in progress (starting one if work is pending), or undefined when idle. */
  nextEventTime(): number | undefined {
    if (!this.busy && this.pendingStart !== Infinity) {
      this.startIteration(this.pendingStart, this.pendingEvents);
    }
    return this.busy ? this.iterEnd : undefined;
  }

  /** End of the iteration in progress, without starting a pending one (undefined: none running). */
  get iterationEnd(): number | undefined {
    return this.busy ? this.iterEnd : undefined;
  }

  /**
   * A time before which `advance` finishes no sequence, as long as nothing is submitted or
   * cancelled: the end of the first iteration that may finish, admit or preempt one, or of the
   * `maxIterations`-th; undefined when idle. Starts a pending iteration, as nextEventTime does.
   * For speed only (the simulator wakes the engine there rather than at every iteration end, and
   * checks that no finish comes earlier); it mirrors startIteration's cost of a step that admits
   * nothing, and answers the in-progress iteration's end whenever the next steps are not that.
   */
  quietUntil(maxIterations: number): number | undefined {
    let t = this.nextEventTime();
    const n = this.running.length;
    if (t === undefined || n === 0 || this.mode === 2) return t;
    const p = this.p;
    // The cheap test first (the order of these early answers does not matter: each answers t).
    // LoRA: a waiting sequence behind a blocked one may be admissible; no quiet steps past it.
    if (this.adapters !== undefined && this.waitingCount > 0) return t;
    if (this.waitingCount > 0) {
      // The head stays out while the batch is full or its KV does not fit (quiet steps only add KV).
      const h = this.head();
      if (h && n < p.slots && this.physicalKv() + this.kvNeed(h) <= p.kvCapacityTokens) return t;
    }
    if (this.planStamp !== this.batchStamp) this.plan();
    if (this.mode === 1 && !this.planEmit) return t;
    const left = this.planFinish - this.quietSteps;
    // Boundary k (1: the end of the iteration in progress) finishes a sequence when k >= left; with
    // pagedKv it may preempt once the batch's KV, n tokens more per step, outgrows the pool.
    let k = Math.min(left, maxIterations);
    if (this.sharing && n > 1)
      k = Math.min(k, Math.max(1, Math.floor((p.kvCapacityTokens - this.physicalKv()) / n) + 1));
    // startIteration's cost of a step that admits nothing, summed left to right as it sums it.
    const fixed = p.baseStepS + p.perSeqS * n;
    const perToken = p.perTokenS;
    const noPrefill = p.prefillPerTokenS * 0;
    const speed = p.speed;
    let kv = this.kvUsed;
    for (let j = 1; j < k; j++) {
      kv += n;
      const cost = fixed + perToken * (kv - n) + noPrefill;
      t += cost / speed;
    }
    return t;
  }

  /** Run every iteration that ends at or before `now`, in order; returns their events in time order. */
  advance(now: number): EngineEvent[] {
    // Events collect in a reused array, copied out only when there are some: the simulator calls
    // this at every iteration end, most of which report nothing when token events are off.
    const out = this.scratch;
    if (this.pendingEvents.length > 0) {
      for (let i = 0; i < this.pendingEvents.length; i++) out.push(this.pendingEvents[i]!);
      this.pendingEvents = [];
    }
    while (true) {
      if (!this.busy) {
        if (this.pendingStart > now) break;
        this.startIteration(this.pendingStart, out);
        continue;
      }
      if (this.iterEnd > now) break;
      // Quiet steps that stop short of `now` stopped at quietRun's limit: a boundary that is not
      // quiet (asked again, quietRun would say so), for finishIteration at once.
      if (this.quietRun(now) && this.iterEnd > now) break;
      this.finishIteration(out);
    }
    return out.length === 0 ? NO_EVENTS : out.splice(0);
  }

  /**
   * Run at once the iterations ending at or before `now` that finish, admit and preempt nothing
   * (the ones quietUntil looks past) — the same state as finishIteration + startIteration run
   * one by one, without touching a sequence (quietSteps counts the steps for all). The end times
   * come from the same arithmetic, in the same order. false: the next boundary is not quiet, or
   * what happens there is for finishIteration to say (token events, chunked prefill, a sequence
   * before its first token or waiting out a prefill step).
   */
  private quietRun(now: number): boolean {
    if (this.tokenEvents || this.mode === 2) return false;
    const n = this.running.length;
    if (n === 0) return false;
    const p = this.p;
    // The cheap test first (the order of these early answers does not matter: each is false).
    if (this.adapters !== undefined && this.waitingCount > 0) return false;
    if (this.waitingCount > 0) {
      // The head stays out while the batch is full or its KV does not fit (quiet steps only add KV).
      const h = this.head();
      if (h && n < p.slots && this.physicalKv() + this.kvNeed(h) <= p.kvCapacityTokens) return false;
    }
    if (this.planStamp !== this.batchStamp) this.plan();
    if (!this.planEmit || !this.planStarted) return false;
    // Boundary j (1: the end of the iteration in progress) finishes a sequence when j >= left.
    let k = this.planFinish - this.quietSteps - 1;
    // With pagedKv, boundary j preempts once the batch's KV (n tokens more per step) outgrows the pool.
    if (this.sharing && n > 1) k = Math.min(k, Math.floor((p.kvCapacityTokens - this.physicalKv()) / n));
    if (k < 1) return false;
    let t = this.iterEnd;
    let kv = this.kvUsed;
    let j = 0;
    // startIteration's cost of a step that admits nothing (context = kvUsed − n, uncached 0), summed
    // left to right as it sums it.
    const fixed = p.baseStepS + p.perSeqS * n;
    const perToken = p.perTokenS;
    const noPrefill = p.prefillPerTokenS * 0;
    const speed = p.speed;
    while (j < k && t <= now) {
      j++;
      kv += n;
      const cost = fixed + perToken * (kv - n) + noPrefill;
      t = t + cost / speed;
    }
    this.quietSteps += j; // every sequence's generated (and own) += j, see sync()
    this.kvUsed = kv;
    this.generatedTotal += n * j;
    if (this.sharing) {
      this.ownTokens += n * j;
      // The pool's room only shrinks over these steps: evicting to the last one is evicting step by step.
      this.trimCache();
    }
    this.iterEnd = t;
    return true;
  }

  /** Sequences in the batch (stats().running, without building the stats). */
  get batchSize(): number {
    return this.running.length;
  }

  /** Sequences waiting for admission (stats().waiting). */
  get queueLength(): number {
    return this.waitingCount;
  }

  /** Share of the KV pool in use, at most 1 (stats().kvUsage). */
  get kvUsage(): number {
    return Math.min(1, this.physicalKv() / this.p.kvCapacityTokens);
  }

  /**
   * Visit every live sequence: the batch, then the waiting queue (for per-model metrics, which the
   * model does not know about). O(live sequences).
   */
  forEachLive(visit: (id: string, running: boolean) => void): void {
    const run = this.running;
    for (let i = 0; i < run.length; i++) visit(run[i]!.id, true);
    const q = this.waitQ;
    for (let i = this.waitHead; i < q.length; i++) if (q[i]!.state === WAITING) visit(q[i]!.id, false);
  }

  stats(): EngineStats {
    return {
      running: this.running.length,
      waiting: this.waitingCount,
      kvUsage: Math.min(1, this.physicalKv() / this.p.kvCapacityTokens),
      prefixCacheQueries: this.queries,
      prefixCacheHits: this.hits,
      completed: this.completed,
      preemptions: this.preemptions,
      generatedTokens: this.generatedTotal,
      promptTokens: this.promptTotal,
      loraLoads: this.loraLoads,
    };
  }

  /** LoRA: what vLLM's `vllm:lora_requests_info` reports; undefined without LoRA. */
  loraInfo(): LoraInfo | undefined {
    if (this.adapters === undefined) return undefined;
    const running = new Set<string>();
    const waiting = new Set<string>();
    for (const [a, n] of this.slots) if (n > 0) running.add(a);
    const q = this.waitQ;
    for (let i = this.waitHead; i < q.length; i++) {
      const s = q[i]!;
      if (s.state === WAITING && s.adapter !== undefined) waiting.add(s.adapter);
    }
    return {
      maxLora: this.maxLora,
      running: [...running],
      waiting: [...waiting],
      loaded: [...this.slots.keys()],
    };
  }

  /** First live waiting sequence, dropping cancelled ones from the front. */
  private head(): Seq | undefined {
    const q = this.waitQ;
    while (this.waitHead < q.length && q[this.waitHead]!.state !== WAITING) this.waitHead++;
    // Compact now and then so the array does not grow with everything ever submitted.
    if (this.waitHead > 1024 && this.waitHead * 2 > q.length) {
      q.copyWithin(0, this.waitHead);
      q.length -= this.waitHead;
      this.waitHead = 0;
    }
    return this.waitHead < q.length ? q[this.waitHead] : undefined;
  }

  /** Admit what fits at time `t` and start an iteration; go idle if nothing can run yet. */
  private startIteration(t: number, out: EngineEvent[]): void {
    const p = this.p;
    this.pendingStart = Infinity;
    this.batchStamp++;
    if (this.mode === 2) {
      this.startChunked(t, out);
      return;
    }
    const before = this.running.length;
    let uncached = 0;
    const lora = this.adapters !== undefined;
    this.swapDue = 0;
    while (this.waitingCount > 0 && this.running.length < p.slots) {
      const s = lora ? this.loraHead(t) : this.head();
      if (!s || s.submitT > t) break;
      if (this.running.length > 0 && this.physicalKv() + this.kvNeed(s) > p.kvCapacityTokens) break;
      if (lora) this.take(s);
      else {
        this.waitHead++;
        this.waitingCount--;
      }
      uncached += this.admit(s, t, out);
    }
    const n = this.running.length;
    if (this.mode === 1 && n > 0) {
      // vLLM v0 without chunking: a step that admits prompts is a prefill-only step; the batch's
      // decodes wait for it. Its cost is the prompts' (weights are read once either way).
      const fresh = n - before;
      // Without admissions every sequence emits; they all do already unless the last step held some.
      if (fresh > 0 || this.someHeld) {
        for (let i = 0; i < n; i++) this.running[i]!.emits = fresh === 0 || i >= before;
        this.someHeld = fresh > 0 && before > 0;
      }
      if (fresh > 0) {
        this.iterEnd = t + (p.baseStepS + p.perSeqS * fresh + p.prefillPerTokenS * uncached) / p.speed;
        if (this.swapDue > 0) this.iterEnd += this.swapDue;
        this.busy = true;
        return;
      }
    }
    if (n === 0) {
      // Nothing runnable now: wake when the first waiting sequence has been submitted.
      const s = this.waitingCount > 0 ? this.head() : undefined;
      this.pendingStart = s ? s.submitT : Infinity;
      this.busy = false;
      return;
    }
    const context = this.kvUsed - n; // prompt + generated of every running sequence
    const cost = p.baseStepS + p.perSeqS * n + p.perTokenS * context + p.prefillPerTokenS * uncached;
    this.iterEnd = t + cost / p.speed;
    if (this.swapDue > 0) this.iterEnd += this.swapDue;
    this.busy = true;
  }

  /**
   * 'chunked': decodes first (one token each), then prompt chunks in admission order, then new
   * admissions, all within the iteration's token budget (vLLM's chunked-prefill scheduler).
   */
  private startChunked(t: number, out: EngineEvent[]): void {
    const p = this.p;
    this.batchStamp++;
    const run = this.running;
    let budget = this.chunkBudget;
    let prefill = 0;
    for (let i = 0; i < run.length; i++) {
      const s = run[i]!;
      if (s.prefillLeft === 0) {
        s.emits = true;
        budget--;
      }
    }
    for (let i = 0; i < run.length; i++) {
      const s = run[i]!;
      if (s.prefillLeft > 0) {
        const c = Math.min(s.prefillLeft, Math.max(0, budget));
        s.prefillLeft -= c;
        budget -= c;
        prefill += c;
        s.emits = s.prefillLeft === 0;
      }
    }
    const lora = this.adapters !== undefined;
    this.swapDue = 0;
    while (budget > 0 && this.waitingCount > 0 && run.length < p.slots) {
      const s = lora ? this.loraHead(t) : this.head();
      if (!s || s.submitT > t) break;
      if (run.length > 0 && this.physicalKv() + this.kvNeed(s) > p.kvCapacityTokens) break;
      if (lora) this.take(s);
      else {
        this.waitHead++;
        this.waitingCount--;
      }
      const left = this.admit(s, t, out);
      const c = Math.min(left, budget);
      s.prefillLeft = left - c;
      budget -= c;
      prefill += c;
      s.emits = s.prefillLeft === 0;
    }
    const n = run.length;
    if (n === 0) {
      const s = this.waitingCount > 0 ? this.head() : undefined;
      this.pendingStart = s ? s.submitT : Infinity;
      this.busy = false;
      return;
    }
    const context = this.kvUsed - n;
    const cost = p.baseStepS + p.perSeqS * n + p.perTokenS * context + p.prefillPerTokenS * prefill;
    this.iterEnd = t + cost / p.speed;
    if (this.swapDue > 0) this.iterEnd += this.swapDue;
    this.busy = true;
  }

  /** Move `s` into the batch; returns its uncached prompt tokens (this iteration's prefill). */
  private admit(s: Seq, t: number, out: EngineEvent[]): number {
    const hashes = s.blockHashes;
    let cached = 0;
    // Waiting, its counts are up to date: it counts quiet steps from now on.
    s.mark = this.quietSteps;
    this.acquire(s);
    this.batchStamp++;
    if (s.preempted) {
      // Readmitted after preemption: recompute prompt and generated tokens, less what is still in
      // the pool; not a new prefix lookup for the hit rate (routing did not cause it).
      let matched = 0;
      while (matched < hashes.length && (this.refs.has(hashes[matched]!) || this.cache.has(hashes[matched]!)))
        matched++;
      this.hold(hashes);
      s.own = this.ownAtAdmission(s);
      this.ownTokens += s.own;
      this.trimCache();
      s.preempted = false;
      s.state = RUNNING;
      this.running.push(s);
      this.kvUsed += s.promptTokens + s.generated + 1;
      return (
        s.promptTokens - Math.min(matched * this.p.blockSize, Math.max(0, s.promptTokens - 1)) + s.generated
      );
    }
    if (this.sharing) {
      // Hit: the chain of blocks some running sequence holds or the cache still keeps.
      let matched = 0;
      while (matched < hashes.length && (this.refs.has(hashes[matched]!) || this.cache.has(hashes[matched]!)))
        matched++;
      this.queries += hashes.length;
      this.hits += matched;
      cached = Math.min(matched * this.p.blockSize, Math.max(0, s.promptTokens - 1));
      this.hold(hashes);
      s.own = this.ownAtAdmission(s);
      this.ownTokens += s.own;
      this.trimCache();
    } else if (this.slotCache !== undefined) {
      // llama.cpp: the free slot sharing the longest prefix; only what it lacks is prefilled.
      s.cacheSlot = this.slotCache.take(hashes);
      const matched = s.cacheSlot >= 0 ? this.slotCache.matched : 0;
      this.queries += hashes.length;
      this.hits += matched;
      cached = Math.min(matched * this.p.blockSize, Math.max(0, s.promptTokens - 1));
    } else if (hashes.length > 0) {
      const matched = this.cache.match(hashes);
      this.queries += hashes.length;
      this.hits += matched;
      cached = Math.min(matched * this.p.blockSize, Math.max(0, s.promptTokens - 1));
      this.cache.insert(hashes);
    }
    if (!this.sharing) s.blockHashes = NO_HASHES;
    s.state = RUNNING;
    s.admitT = t;
    s.cachedTokens = cached;
    this.running.push(s);
    this.kvUsed += s.promptTokens + 1;
    this.promptTotal += s.promptTokens;
    if (this.admitEvents) out.push({ type: 'admitted', id: s.id, t, cachedTokens: cached });
    return s.promptTokens - cached;
  }

  /** End the iteration in progress: one token each, finish the complete ones, start the next. */
  private finishIteration(out: EngineEvent[]): void {
    const t = this.iterEnd;
    this.busy = false;
    this.batchStamp++;
    const run = this.running;
    let keep = 0;
    const gated = this.mode !== 0;
    for (let i = 0; i < run.length; i++) {
      const s = run[i]!;
      this.sync(s);
      if (gated && !s.emits) {
        // Still prefilling, or its decode waited for a prefill step. (Stored only once an earlier
        // one finished: a pointer store into an array pays a write barrier.)
        if (keep !== i) run[keep] = s;
        keep++;
        continue;
      }
      s.generated++;
      this.generatedTotal++;
      if (s.generated === 1) s.firstTokenT = t;
      if (this.tokenEvents) out.push({ type: 'tokens', id: s.id, t, total: s.generated });
      if (s.generated >= s.outputTokens) {
        this.kvUsed -= s.promptTokens + s.generated; // its reservation: prompt + (generated-1) + 1
        s.state = GONE;
        this.byId?.delete(s.id);
        this.completed++;
        this.releaseSlot(s);
        if (this.sharing) this.release(s, s.contextHashes);
        else if (this.slotCache !== undefined) this.slotCache.release(s.cacheSlot, s.contextHashes);
        else if (s.contextHashes !== undefined) this.cache.insert(s.contextHashes);
        out.push({
          type: 'finished',
          id: s.id,
          ref: s.ref,
          t,
          promptTokens: s.promptTokens,
          outputTokens: s.generated,
          cachedTokens: s.cachedTokens,
          queuedS: s.admitT - s.submitT,
          prefillS: s.firstTokenT - s.admitT,
          decodeS: t - s.firstTokenT,
        });
      } else {
        this.kvUsed++;
        if (this.sharing) {
          s.own++;
          this.ownTokens++;
        }
        if (keep !== i) run[keep] = s;
        keep++;
      }
    }
    // pop, not `length = keep`: shrinking by length trims the backing store, a runtime call.
    while (run.length > keep) run.pop();
    if (this.sharing) {
      this.preemptOverflow();
      this.trimCache();
    }
    if (keep > 0 || this.waitingCount > 0) this.startIteration(t, out);
  }
}
