/**
 * The engine's prefix cache: an LRU set of prompt-block hashes (53-bit integer hash chains, see
 * `promptBlockHashes`). Touch and evict are O(1).
 *
 * Flat storage, no object per block: an open-addressing hash table (linear probing, backward-shift
 * deletion) of node indexes, and the LRU list as typed arrays of links. A replayed production
 * trace inserts millions of blocks per run; a Map of nodes made this the simulator's hottest code
 * (hashing string keys, boxing 53-bit keys, allocating nodes for the collector).
 */
import type { BlockHash } from './tokens.js';

const NONE = -1;
/** Nodes allocated up front; the pool doubles as the cache fills, up to its capacity. */
const INITIAL_NODES = 1024;
/**
 * Table slots per node (at least). A full cache evicts a block for every one it inserts, and at
 * a quarter full linear probing's misses and backward-shift deletions scan short runs (at half
 * full they were most of a Mooncake replay's engine time).
 */
const LOAD = 4;

export class PrefixCache {
  /** Node → its block hash. */
  private keys: Float64Array;
  /** Node → the next less / more recently used node (NONE at the ends). */
  private prev: Int32Array;
  private next: Int32Array;
  /** Node → the table slot holding it (kept up to date as deletions shift entries). */
  private slotOf: Int32Array;
  /** Slot → node + 1 (0: empty). Power-of-two size, at least LOAD times the node pool. */
  private table: Int32Array;
  private mask: number;
  /** 32 − log2(table size): Fibonacci hashing keeps the product's top bits. */
  private shift: number;
  private count = 0;
  /** Nodes in use are [0, used) minus the free list. */
  private used = 0;
  private freeList: number[] = [];
  /** Least recently used. */
  private head = NONE;
  /** Most recently used. */
  private tail = NONE;

  constructor(readonly capacity: number) {
    const nodes = Math.max(1, Math.min(capacity, INITIAL_NODES));
    this.keys = new Float64Array(nodes);
    this.prev = new Int32Array(nodes);
    this.next = new Int32Array(nodes);
    this.slotOf = new Int32Array(nodes);
    const bits = Math.max(2, Math.ceil(Math.log2(nodes * LOAD)));
    this.table = new Int32Array(1 << bits);
    this.mask = (1 << bits) - 1;
    this.shift = 32 - bits;
  }

  get size(): number {
    return this.count;
  }

  has(hash: BlockHash): boolean {
    return this.find(hash) >= 0;
  }

  /** Take a block out (it is in use elsewhere: not evictable, not counted here). */
  delete(hash: BlockHash): void {
    const slot = this.find(hash);
    if (slot < 0) return;
    const node = this.table[slot]! - 1;
    this.removeSlot(slot);
    this.unlink(node);
    this.freeList.push(node);
    this.count--;
  }

  /** Evict least recently used blocks until at most `n` remain. */
  evictTo(n: number): void {
    while (this.count > n && this.head !== NONE) this.evictOldest();
  }

  /** Blocks in the longest prefix of `hashes` that is cached (a chain: stop at the first miss). */
  match(hashes: readonly BlockHash[]): number {
    if (this.capacity <= 0 || this.count === 0) return 0;
    let n = 0;
    while (n < hashes.length && this.find(hashes[n]!) >= 0) n++;
    return n;
  }

  /**
   * Insert or touch all of `hashes`. Walked last-to-first so a chain's first block ends up most
   * recently used: eviction then eats chains from their tails, never orphaning a chain's later
   * blocks behind an evicted head (vLLM frees blocks in the same reverse order).
   */
  insert(hashes: readonly BlockHash[]): void {
    if (this.capacity <= 0) return;
    for (let i = hashes.length - 1; i >= 0; i--) {
      const h = hashes[i]!;
      const slot = this.find(h);
      if (slot >= 0) {
        const node = this.table[slot]! - 1;
        if (node !== this.tail) {
          this.unlink(node);
          this.append(node);
        }
        continue;
      }
      if (this.count >= this.capacity && this.head !== NONE) this.evictOldest();
      const node = this.allocNode();
      this.keys[node] = h;
      this.place(node);
      this.append(node);
      this.count++;
    }
  }

  /** The preferred slot of a key: its low and high 32 bits mixed (keys are integers < 2^53). */
  private home(key: number): number {
    const lo = key >>> 0;
    const hi = (key / 4294967296) >>> 0;
    return Math.imul(lo ^ Math.imul(hi, 0x85ebca6b), 0x9e3779b1) >>> this.shift;
  }

  /** The slot holding `key`, or -1. */
  private find(key: number): number {
    const t = this.table;
    const k = this.keys;
    let i = this.home(key);
    for (;;) {
      const v = t[i]!;
      if (v === 0) return -1;
      if (k[v - 1] === key) return i;
      i = (i + 1) & this.mask;
    }
  }

  /** Put `node` (its key set, not in the table) into its slot. */
  private place(node: number): void {
    const t = this.table;
    let i = this.home(this.keys[node]!);
    while (t[i] !== 0) i = (i + 1) & this.mask;
    t[i] = node + 1;
    this.slotOf[node] = i;
  }

  /** Empty `slot`, shifting later entries of its probe run back so every key stays findable. */
  private removeSlot(slot: number): void {
    const t = this.table;
    const mask = this.mask;
    let hole = slot;
    let j = slot;
    for (;;) {
      j = (j + 1) & mask;
      const v = t[j]!;
      if (v === 0) break;
      const home = this.home(this.keys[v - 1]!);
      // Move j into the hole unless its home lies cyclically in (hole, j].
      const stays = hole <= j ? hole < home && home <= j : hole < home || home <= j;
      if (!stays) {
        t[hole] = v;
        this.slotOf[v - 1] = hole;
        hole = j;
      }
    }
    t[hole] = 0;
  }

  private evictOldest(): void {
    const node = this.head;
    this.removeSlot(this.slotOf[node]!);
    this.unlink(node);
    this.freeList.push(node);
    this.count--;
  }

  private allocNode(): number {
    if (this.freeList.length > 0) return this.freeList.pop()!;
    if (this.used === this.keys.length) this.grow();
    return this.used++;
  }

  /** Double the node pool (never past capacity's need) and rebuild the table at twice its size. */
  private grow(): void {
    const nodes = this.keys.length * 2;
    const keys = new Float64Array(nodes);
    keys.set(this.keys);
    const prev = new Int32Array(nodes);
    prev.set(this.prev);
    const next = new Int32Array(nodes);
    next.set(this.next);
    this.slotOf = new Int32Array(nodes); // every node is placed again below
    this.keys = keys;
    this.prev = prev;
    this.next = next;
    const bits = Math.ceil(Math.log2(nodes * LOAD));
    const old = this.table;
    this.table = new Int32Array(1 << bits);
    this.mask = (1 << bits) - 1;
    this.shift = 32 - bits;
    for (const v of old) if (v !== 0) this.place(v - 1);
  }

  private unlink(n: number): void {
    const p = this.prev[n]!;
    const x = this.next[n]!;
    if (p !== NONE) this.next[p] = x;
    else this.head = x;
    if (x !== NONE) this.prev[x] = p;
    else this.tail = p;
  }

  private append(n: number): void {
    this.prev[n] = this.tail;
    this.next[n] = NONE;
    if (this.tail !== NONE) this.next[this.tail] = n;
    else this.head = n;
    this.tail = n;
  }
}
