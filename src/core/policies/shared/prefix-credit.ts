import { chunkKeys } from '../../prefix/chunk-keys.js';
import { KeyTable, LaneTable } from '../../prefix/key-table.js';
import { PrefixTrie } from '../../prefix/prefix-trie.js';

/**
 * The prompt prefix each backend likely holds in its engine's prefix cache, as far as this router
 * can tell (issue #20, skylb-multiturn-12): a router-side record of the prompt chunks it sent to
 * each backend, kept per backend as an (approximate) LRU of at most `capacityChunks` chunks,
 * roughly how an engine's prefix cache keeps prompt blocks (vLLM / SGLang evict least recently used blocks, a
 * chain's tail first). It is what the router sent, not what the engine kept: an engine that ran out
 * of room evicted sooner, and the answers it cached are not seen here (the next turn's prompt
 * resends them and is recorded then).
 *
 * Chunks are the prefix trie's chain hashes (`PrefixTrie.keys`: chunk i's key covers chunks 0..i),
 * 64 characters by default, i.e. one 16-token KV block under the project's 4-characters-a-token
 * convention. A request's keys are hashed once and kept from its first pick to its dispatch (held
 * requests are picked again and again; each candidate's lookup is a binary search over them): only
 * those of the chunks recorded (see positions), folded to 30 bits (PromptKeys). A
 * prompt is hashed past its first chunk only when some prompt sent before shares that chunk (see
 * record): traffic that shares no prefix pays one chunk's hash per request.
 *
 * Each backend's record is prefix-closed: a prompt's chunks are touched last to first, so its first
 * chunk is the most recently used and eviction eats chains from their tails (as the engine's
 * cache does; here in two generations of capacityChunks / 2, see Generations). So "chunk i
 * recorded" implies chunks 0..i are, and the longest recorded prefix is found by bisection:
 * O(log chunks) lookups per candidate.
 */
export interface PrefixCreditOptions {
  /** Characters per chunk (the router has no tokenizer). */
  readonly chunkChars: number;
  /** Chunks remembered per backend; the least recently sent go first beyond it. */
  readonly capacityChunks: number;
  /** Characters of a prompt indexed: bounds the per-request hashing. */
  readonly maxPrefixChars: number;
  /**
   * Another credit of the same chunking whose per-backend tables this one shares, as their second
   * lane (LaneTable): a prompt both record is inserted once.
   */
  readonly shareTablesWith?: PrefixCredit;
}

/**
 * A prompt's chunk keys as the credit uses them: `length` chunks, and the keys of the chunks
 * recorded (`at[j]`: chunk `position(j, length)`'s chain key folded by `small`). A 50k-token prompt
 * keeps ~320 of its ~3,100 keys, 4 bytes each.
 */
export class PromptKeys {
  constructor(
    /** Chunks the prompt has (indexed). */
    readonly length: number,
    readonly at: Int32Array,
  ) {}
}

/** Requests whose chunk keys are kept between their first pick and their dispatch. */
const MAX_MEMO = 4096;
const EMPTY = new PromptKeys(0, new Int32Array(0));
/** First chunks remembered (a prompt whose head was forgotten is kept pending again). */
const MAX_HEADS = 65_536;
/** Characters of unhashed prompts kept (UTF-16: 8 MB); the oldest go first beyond it. */
const MAX_PENDING_CHARS = 1 << 22;

export class PrefixCredit {
  readonly chunkChars: number;
  readonly capacityChunks: number;
  /** Hashes prompts into chunk keys (its node arrays are never used: nothing is inserted). */
  private readonly hasher: PrefixTrie;
  /**
   * headOf's key: the hasher's first key, hashed alone into a reused array (the hasher's keys()
   * makes a typed array per call, which cost more than hashing the one chunk).
   */
  private readonly headKey = new Float64Array(1);
  /** Whether a prompt's first chunk is indexed at all (maxPrefixChars holds a chunk). */
  private readonly headIndexed: boolean;
  /** Per backend, the chunk keys sent there (two generations: an approximate LRU). */
  private readonly sent = new Map<string, Lane>();
  /** Per backend, the table its lanes share (with shareTablesWith's, when set). */
  private readonly tables: Map<string, LaneTable>;
  private readonly lane: 0 | 1;
  /** Per request until it is dispatched: its keys, or its first chunk's key while not hashed. */
  private readonly memo = new Map<string, PromptKeys | number>();
  /** All of a prompt's chain keys, hashed into this and kept only at the recorded positions. */
  private scratch = new Float64Array(0);
  /** First-chunk keys of the prompts recorded (hashed in full), on any backend. */
  private readonly heads = new Generations(MAX_HEADS / 2);
  /** The one prompt sent with each first chunk no other had yet: its backend and text, unhashed. */
  private readonly pending = new Map<number, { backend: string; text: string }>();
  private pendingChars = 0;

  constructor(opts: PrefixCreditOptions) {
    if (!Number.isInteger(opts.capacityChunks) || opts.capacityChunks < 0)
      throw new Error('prefix credit: capacityChunks must be a non-negative integer');
    this.chunkChars = opts.chunkChars;
    this.capacityChunks = opts.capacityChunks;
    this.hasher = new PrefixTrie({
      chunkChars: opts.chunkChars,
      maxEntries: 1,
      maxPrefixChars: opts.maxPrefixChars,
    });
    this.headIndexed = opts.maxPrefixChars >= opts.chunkChars;
    const other = opts.shareTablesWith;
    if (other !== undefined && (other.lane !== 0 || other.chunkChars !== opts.chunkChars))
      throw new Error('prefix credit: shares tables only with a first-lane credit of the same chunking');
    this.tables = other?.tables ?? new Map<string, LaneTable>();
    this.lane = other === undefined ? 0 : 1;
  }

  /**
   * A request's chunk keys, hashed once per request id and kept until it is dispatched — or none
   * (nothing hashed past its first chunk) when no prompt sent before began with the same chunk: then
   * no backend holds any prefix of it.
   */
  keysOf(id: string, text: string): PromptKeys {
    if (this.capacityChunks === 0) return EMPTY;
    const m = this.memo.get(id);
    if (typeof m === 'object') return m;
    // Its first chunk's key (memoised: a held request is asked again and again).
    const head = m ?? this.headOf(text);
    if (head === undefined) return EMPTY;
    let k: PromptKeys = EMPTY;
    if (this.heads.has(small(head)) || this.resolve(head)) k = this.hash(text);
    if (m === undefined && this.memo.size >= MAX_MEMO) this.memo.delete(this.memo.keys().next().value!);
    this.memo.set(id, k.length > 0 ? k : head);
    return k;
  }

  /** Characters of the longest prefix of `keys` this router sent `backend` and still remembers. */
  cachedChars(backend: string, keys: PromptKeys): number {
    const g = this.sent.get(backend);
    const at = keys.at;
    if (g === undefined || at.length === 0 || !g.has(at[0]!)) return 0;
    // Prefix-closed over the recorded positions: find the last one recorded by bisection (position
    // lo is recorded).
    let lo = 0;
    let hi = at.length;
    while (hi - lo > 1) {
      const mid = (lo + hi) >> 1;
      if (g.has(at[mid]!)) lo = mid;
      else hi = mid;
    }
    return (position(lo, keys.length) + 1) * this.chunkChars;
  }

  /**
   * The request was pushed to `backend`: its chunks become that backend's most recently used. The
   * first prompt to begin with its first chunk is only kept (unhashed) until a later one shares that
   * chunk, and recorded then: traffic whose prompts share nothing costs one chunk's hash each.
   */
  record(id: string, backend: string, text: string, keys?: PromptKeys): void {
    if (this.capacityChunks === 0) return;
    const m = this.memo.get(id);
    this.memo.delete(id);
    // `keys`: the prompt's keys as another record of the same chunking hashed them (not hashed twice).
    let k = keys !== undefined && keys.length > 0 ? keys : typeof m === 'object' ? m : undefined;
    if (k === undefined) {
      const head = typeof m === 'number' ? m : this.headOf(text);
      if (head === undefined) return;
      if (!this.heads.has(small(head)) && !this.resolve(head)) {
        this.pending.set(head, { backend, text });
        this.pendingChars += text.length;
        while (this.pendingChars > MAX_PENDING_CHARS) {
          const [h, p] = this.pending.entries().next().value!;
          this.pending.delete(h);
          this.pendingChars -= p.text.length;
        }
        return;
      }
      k = this.hash(text);
    }
    this.touch(backend, k);
  }

  /** A request that will not be dispatched (or not again soon) need not keep its keys. */
  forget(id: string): void {
    this.memo.delete(id);
  }

  removeBackend(name: string): void {
    const g = this.sent.get(name);
    this.sent.delete(name);
    if (g !== undefined && g.table.detach(this.lane)) this.tables.delete(name);
    for (const [h, p] of this.pending)
      if (p.backend === name) {
        this.pending.delete(h);
        this.pendingChars -= p.text.length;
      }
  }

  /** The key of a text's first chunk (undefined: shorter than a chunk, never matched). */
  private headOf(text: string): number | undefined {
    if (text.length < this.chunkChars || !this.headIndexed) return undefined;
    chunkKeys(text, this.chunkChars, this.headKey);
    return this.headKey[0];
  }

  /** A prompt kept unhashed with this first chunk is recorded now (a later one shares it). */
  private resolve(head: number): boolean {
    const p = this.pending.get(head);
    if (p === undefined) return false;
    this.pending.delete(head);
    this.pendingChars -= p.text.length;
    this.touch(p.backend, this.hash(p.text));
    return true;
  }

  /**
   * A text's keys at the recorded positions: every chain key is hashed (each covers the chunks
   * before it) into a scratch array reused from prompt to prompt, and only the recorded ones kept.
   */
  private hash(text: string): PromptKeys {
    const n = this.hasher.keyCount(text);
    if (n === 0) return EMPTY;
    if (this.scratch.length < n) this.scratch = new Float64Array(Math.max(n, 2 * this.scratch.length));
    const all = this.hasher.keys(text, this.scratch);
    const at = new Int32Array(positions(n));
    for (let j = 0; j < at.length; j++) at[j] = small(all[position(j, n)]!);
    return new PromptKeys(n, at);
  }

  /**
   * Chunks remembered for `backend` from now on (its engine's cache as learned: the engine reported
   * fewer or more cached tokens than the record predicted). A smaller capacity takes effect as the
   * record's generations turn over, not at once.
   */
  setCapacity(backend: string, chunks: number): void {
    const gen = Math.max(1, Math.floor(chunks / 2));
    const g = this.sent.get(backend);
    if (g === undefined) this.sent.set(backend, this.laneFor(backend, gen));
    else g.gen = gen;
  }

  /** Drops `backend`'s forgotten keys ahead of need, when its table is filling (outside a decision). */
  maintain(backend: string): void {
    this.tables.get(backend)?.maintain();
  }

  private laneFor(backend: string, gen: number): Lane {
    let t = this.tables.get(backend);
    if (t === undefined) {
      t = new LaneTable(Math.min(gen, 1024));
      this.tables.set(backend, t);
    }
    return new Lane(t, this.lane, gen);
  }

  private touch(backend: string, keys: PromptKeys): void {
    if (keys.length === 0) return;
    let g = this.sent.get(backend);
    if (g === undefined) {
      g = this.laneFor(backend, Math.max(1, Math.floor(this.capacityChunks / 2)));
      this.sent.set(backend, g);
    }
    g.touchChain(keys.at);
    this.heads.touch(keys.at[0]!);
  }

  /** Chunks remembered for a backend (tests, describe). */
  sizeOf(backend: string): number {
    return this.sent.get(backend)?.size ?? 0;
  }

  /** Bytes of a backend's table (shared with shareTablesWith's record): 20–40 per key remembered. */
  bytesOf(backend: string): number {
    return this.sent.get(backend)?.table.bytes ?? 0;
  }
}

/** Keys a chain walk inserts before it reads the rest of its slots ahead (LaneTable.warm). */
const WARM_AFTER = 4;

/**
 * One backend's record as Generations keeps it (two generations of at most `gen` keys: an
 * approximate LRU), in a lane of the backend's LaneTable: a key is in the current generation when
 * its lane generation is the lane's current one, in the previous when it is the one before, so a
 * turnover is one increment (nothing cleared; the table drops dead keys when it rebuilds). It
 * answers exactly as Generations would.
 */
class Lane {
  private curSize = 0;
  private prevSize = 0;

  constructor(
    readonly table: LaneTable,
    private readonly lane: 0 | 1,
    public gen: number,
  ) {
    table.attach(lane);
  }

  get size(): number {
    return this.curSize + this.prevSize;
  }

  has(s: number): boolean {
    return this.table.has(s, this.lane);
  }

  /** Adds a `small` key; false when it was already in the current generation. */
  touch(s: number): boolean {
    const t = this.table;
    const at = t.find(s);
    if (at >= 0 && t.isCurrent(at, this.lane)) return false;
    // Full: a new generation starts (the previous one's keys are forgotten).
    if (this.curSize >= this.gen) {
      this.prevSize = this.curSize;
      this.curSize = 0;
      t.turn(this.lane);
      // A turnover may rebuild the table (moving the key's slot).
      t.set(t.find(s), s, this.lane);
    } else t.set(at, s, this.lane);
    this.curSize++;
    return true;
  }

  /** As Generations.touchChain: last chunk to first, stopping at one already in the current generation. */
  touchChain(at: Int32Array): void {
    const n = Math.min(at.length, this.gen);
    const t = this.table;
    t.noteChain(n);
    let j = n - 1;
    let warmed = false;
    while (j >= 0) {
      // The keys that fit in the current generation, in one loop (LaneTable.touchRun).
      const room = this.gen - this.curSize;
      if (room > 0) {
        const most = warmed ? room : Math.min(room, WARM_AFTER);
        const k = t.touchRun(at, j, most, this.lane);
        this.curSize += k;
        j -= k;
        if (t.stopped) return;
        // Still putting after WARM_AFTER keys: a prompt new here (a re-sent one with a new question
        // stops within a key or two) — the rest of its slots are read ahead at once.
        if (!warmed && n - 1 - j >= WARM_AFTER) {
          warmed = true;
          if (j >= 0) t.warm(at, j + 1);
        }
        if (k === most) continue;
      }
      if (j < 0) return;
      // A turnover, or an insert into a half-full table (a rebuild): one key the long way.
      if (!this.touch(at[j]!)) return;
      j--;
    }
  }
}

/**
 * An approximate LRU set in two generations of at most `gen` keys each: keys go into the current
 * one; when it is full it becomes the previous one and the previous one is emptied and becomes the
 * current one. It remembers the last `gen` to `2·gen` distinct keys touched, at one or two lookups
 * per touch (an exact LRU — delete and re-insert per touch, evict one by one — needs three or four,
 * for every chunk of every dispatched prompt). Keys are `small` (30 bits), in KeyTables: 8–16
 * bytes per key, at most 2 × 4 × `gen` slots of 4 bytes in all.
 */
class Generations {
  private cur: KeyTable;
  private prev = new KeyTable(0);

  constructor(public gen: number) {
    this.cur = new KeyTable(Math.min(gen, 1024));
  }

  get size(): number {
    return this.cur.size + this.prev.size;
  }

  get bytes(): number {
    return 4 * (this.cur.capacity + this.prev.capacity);
  }

  /** Whether the `small` key is remembered. */
  has(s: number): boolean {
    return this.cur.has(s) || this.prev.has(s);
  }

  /** Adds a `small` key; false when it was already in the current generation. */
  touch(s: number): boolean {
    // Room in the current generation: one probe finds the key or adds it.
    if (this.cur.size < this.gen) return this.cur.add(s);
    if (this.cur.has(s)) return false;
    // Full: it becomes the previous generation, and the previous one, emptied, the current one.
    const emptied = this.prev;
    this.prev = this.cur;
    emptied.clear(this.gen);
    this.cur = emptied;
    this.cur.add(s);
    return true;
  }

  /**
   * Touch a prompt's chain (its `small` keys at the recorded positions), last chunk to first, so
   * its head is never older than its tail and the set stays prefix-closed; a chain longer than a
   * generation keeps its head (what a later prompt shares). A chunk already in the current
   * generation was touched, with every chunk before it, since the last turnover (a chain is always
   * touched down to its head): the walk stops there, so re-sending a 50k-token document with a new
   * question costs the new chunks, not the document.
   */
  touchChain(at: Int32Array): void {
    for (let j = Math.min(at.length, this.gen) - 1; j >= 0; j--) if (!this.touch(at[j]!)) return;
  }
}

/**
 * Which of a prompt's chunks are recorded: every one of the first DENSE, then every STRIDE-th, and
 * the last. A 50k-token prompt then costs ~300 set entries per backend, not ~3,000 (its credit is
 * exact to a chunk over its first DENSE chunks, to STRIDE chunks beyond: a few hundred tokens of
 * a 50k-token prompt). Both the record and the lookup walk the same positions of a key array.
 */
const DENSE = 128;
const STRIDE = 16;

/** Recorded positions of a prompt of `n` chunks. */
function positions(n: number): number {
  return n <= DENSE ? n : DENSE + Math.ceil((n - DENSE) / STRIDE);
}

/** The chunk index of recorded position `j` of a prompt of `n` chunks. */
function position(j: number, n: number): number {
  return j < DENSE ? j : Math.min(n - 1, DENSE - 1 + (j - DENSE + 1) * STRIDE);
}

/**
 * A chunk key (53 bits) folded to a small integer (30 bits), which a Set hashes and compares far
 * faster than a heap number. Per backend at most a few hundred thousand chunks are kept, so a false
 * match is about one lookup in a few thousand at worst, and it only skews an estimate.
 */
function small(k: number): number {
  return (k % 0x40000000) | 0;
}
