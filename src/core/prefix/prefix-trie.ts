/**
 * Approximate prefix trie over request text (SkyLB §3.2, after SGLang's approximate radix tree):
 * the text is cut into fixed-size character chunks, each chunk hashed, and each node of the path
 * records the backends a request with that prefix was pushed to. It remembers what the router sent
 * where, not what an engine really kept in its KV cache — decisions never wait for an engine.
 *
 * Layout: nodes are slots in typed arrays (key, parent, LRU links, first owner), found through an
 * open-addressing hash table on the chain hash of their prefix (chunk i's key covers chunks 0..i),
 * so a node needs no child table and a walk is one table probe per chunk. Nothing is allocated per
 * node and the arrays live outside the JS heap: ~40 bytes per entry instead of a ~300-byte object
 * with its own owner array and map slot, lookups never box a 53-bit key, and a 100k-entry trie
 * churning through eviction gives the garbage collector nothing to trace or collect.
 *
 * Invariants:
 * - A child's owners are a subset of its parent's (an insert records the backend on every node of
 *   its path; eviction removes leaves; a backend is removed from every node), so a walk can stop at
 *   the first node with no available owner: nothing deeper can have one.
 * - The LRU list runs from least to most recently inserted-through, and a parent always comes after
 *   all its children (a path is touched leaf first, root last), so the list head is always a leaf
 *   and evicting from the head never orphans a subtree.
 *
 * Why one file of ~520 lines: the typed-array layout is the design. Insert, match, eviction and
 * backend removal all maintain the same slots, hash table and LRU links under the invariants
 * above; a split would have to hand the raw arrays across files, and each invariant would then be
 * kept in more than one place. Chunking and hashing the text, which do not touch the layout, are
 * apart (`chunk-keys.ts`).
 */

import { chunkKeys, LOW_BITS } from './chunk-keys.js';

export interface PrefixTrieOptions {
  /** Characters per chunk; a text's last partial chunk is not indexed. */
  readonly chunkChars: number;
  /** Most nodes (chunks) kept; the least recently inserted-through leaves go first beyond it. */
  readonly maxEntries: number;
  /** Only a text's first `maxPrefixChars` characters are indexed (bounds per-request work). */
  readonly maxPrefixChars: number;
}

/** Result of a max-prefix match. */
export interface PrefixMatch {
  /** Chunks matched (0: no available backend was sent even the first chunk). */
  readonly chunks: number;
  /** Characters matched: chunks × chunkChars. */
  readonly chars: number;
  /** Available backend ids holding the longest match, in the order they were first sent it. */
  readonly owners: readonly number[];
}

const NO_MATCH: PrefixMatch = { chunks: 0, chars: 0, owners: [] };
/** A freed owner list's place holder. */
const NO_OWNERS: number[] = [];
/** "No slot" in the slot arrays. */
const NONE = -1;
/**
 * Slots of a new trie (fewer if its bound is lower): ~600 KB, allocated zeroed and touched only as
 * used. Doubling from a few dozen cost a simulation run's trie ~0.5 µs per request in copies,
 * table rebuilds and page faults before it held its first 10k nodes.
 */
const INITIAL_SLOTS = 1 << 14;
/** Table index of a key: its mixed high 32 bits (multiplying by 2^-21 is exact). */
const HIGH_PART = 1 / LOW_BITS;
const home = (key: number, mask: number): number => ((key * HIGH_PART) >>> 0) & mask;

export class PrefixTrie {
  readonly chunkChars: number;
  readonly maxEntries: number;
  readonly maxPrefixChars: number;
  /** Chunks of the longest indexed prefix (an insert uses at most this many keys). */
  private readonly maxChunks: number;
  /** Slots ever needed at once: the bound plus one insert's new path, evicted right after. */
  private readonly slotLimit: number;
  private capacity = 0;
  private key = new Float64Array(0);
  private parent = new Int32Array(0);
  private prev = new Int32Array(0);
  private next = new Int32Array(0);
  /** First owner (trie id) of a live slot. */
  private owner = new Int32Array(0);
  /** Owners of a slot, the first included; 0 for a free one. */
  private owners = new Int32Array(0);
  /**
   * Per slot, 1 + the index in `lists` of its owners after the first; 0 for a node with one owner
   * (most nodes: a request's own tail of the prompt). Typed, so creating a node writes nothing on
   * the JS heap (an element per node of a JS array cost ~15 % of trie time); a list is made when a
   * node gets its second owner.
   */
  private moreAt = new Int32Array(0);
  /** Owner lists after the first, in the order they were first sent the prefix; freed ones reused. */
  private readonly lists: number[][] = [];
  private readonly freeLists: number[] = [];
  /** Nodes each backend (by trie id) is listed on: its share of the tree, kept as nodes come and go. */
  private held = new Int32Array(8);
  /** Open addressing, linear probing: slot + 1, 0 for empty; at most half full. */
  private table = new Int32Array(0);
  private mask = 0;
  private freeSlots = new Int32Array(0);
  private freeCount = 0;
  private used = 0;
  private count = 0;
  private head = NONE;
  private tail = NONE;
  private readonly ids = new Map<string, number>();
  private readonly names: (string | undefined)[] = [];
  private readonly freeIds: number[] = [];
  private idChanges = 0;
  /** Bumped by every change of the node set; guards the walk hint. */
  private mutations = 0;
  /**
   * Slots the last match found for its keys: an insert of the same keys right after (pick, then
   * dispatch) starts from them instead of looking each chunk up again.
   */
  private walkedKeys: ArrayLike<number> | undefined;
  private walkedAt = -1;
  private walkedCount = 0;
  /** The walk stopped at a missing node (or the end), not at an unavailable one: it found them all. */
  private walkedAll = false;
  private walked = new Int32Array(0);

  constructor(opts: PrefixTrieOptions) {
    for (const k of ['chunkChars', 'maxEntries', 'maxPrefixChars'] as const) {
      const v = opts[k];
      if (!Number.isInteger(v) || v <= 0) throw new Error(`prefix trie: ${k} must be a positive integer`);
    }
    this.chunkChars = opts.chunkChars;
    this.maxEntries = opts.maxEntries;
    this.maxPrefixChars = opts.maxPrefixChars;
    this.maxChunks = Math.floor(opts.maxPrefixChars / opts.chunkChars);
    this.slotLimit = opts.maxEntries + Math.min(opts.maxEntries, this.maxChunks);
    this.walked = new Int32Array(Math.min(this.maxChunks, 1024));
  }

  /** Nodes held now (never more than maxEntries after an insert returns). */
  get size(): number {
    return this.count;
  }

  /** Backends known to the trie (each holds at least one node). */
  get backendCount(): number {
    return this.ids.size;
  }

  /** The id of a backend, or undefined if the trie holds nothing for it. */
  idOf(name: string): number | undefined {
    return this.ids.get(name);
  }

  nameOf(id: number): string | undefined {
    return this.names[id];
  }

  /** Changes whenever a backend gets or loses an id: callers caching idOf answers check it. */
  get idVersion(): number {
    return this.idChanges;
  }

  /** Upper bound (exclusive) on ids handed out so far: size arrays indexed by id with it. */
  get idLimit(): number {
    return this.names.length;
  }

  /**
   * Chain hashes of a text's indexed chunks (chunk-keys.ts): key i covers chunks 0..i, so equal
   * keys mean (up to collisions) an equal prefix. They are 53-bit: with 100k nodes a collision is a
   * ~1e-6 event, and it would only cost one misrouted request. Compute once per request and reuse.
   *
   * With `into` (long enough, see keyCount), the keys are written there and a view of them is
   * returned: a caller hashing one request after another need not allocate per request.
   */
  keys(text: string, into?: Float64Array): Float64Array {
    const n = this.keyCount(text);
    const out = into !== undefined && into.length >= n ? into.subarray(0, n) : new Float64Array(n);
    chunkKeys(text, this.chunkChars, out);
    return out;
  }

  /** How many keys `keys(text)` gives. */
  keyCount(text: string): number {
    return Math.floor(Math.min(text.length, this.maxPrefixChars) / this.chunkChars);
  }

  /**
   * Record that a request with these chunk keys was pushed to `backend`: every node of its path
   * gets the backend and becomes most recently used; then the oldest leaves are evicted until the
   * size bound holds. At most `maxPrefixChars / chunkChars` keys are used.
   */
  insert(keys: ArrayLike<number>, backend: string): void {
    const n = Math.min(keys.length, this.maxEntries, this.maxChunks);
    if (n === 0) return;
    const id = this.idFor(backend);
    // The nodes that exist form a prefix of the path (a parent outlives its children); the match
    // just before (pick, then dispatch) already found the first of them.
    if (this.walked.length < n) this.walked = new Int32Array(n);
    const path = this.walked;
    const hinted = this.walkedKeys === keys && this.walkedAt === this.mutations;
    let m = hinted ? Math.min(this.walkedCount, n) : 0;
    if (!hinted || !this.walkedAll)
      for (; m < n; m++) {
        const s = this.lookup(keys[m]!);
        if (s === NONE) break;
        path[m] = s;
      }
    this.mutations++;
    // Those holding the backend form a prefix of them too (subset invariant): find where it ends by
    // bisection — nodes down a shared system prompt can hold hundreds of owners each.
    let lo = 0;
    if (m > 0 && this.holds(path[m - 1]!, id)) lo = m;
    else
      for (let hi = m - 1; lo < hi;) {
        const mid = (lo + hi) >> 1;
        if (this.holds(path[mid]!, id)) lo = mid + 1;
        else hi = mid;
      }
    for (let i = lo; i < m; i++) this.addOwner(path[i]!, id);
    let node = m > 0 ? path[m - 1]! : NONE;
    for (let i = m; i < n; i++) node = this.create(keys[i]!, node, id);
    // Touch leaf first, root-most last (through parent links): parents end up more recent.
    for (let x = node; x !== NONE; x = this.parent[x]!) this.moveToTail(x);
    while (this.count > this.maxEntries) this.remove(this.head);
  }

  private holds(s: number, id: number): boolean {
    return this.owner[s] === id || (this.moreAt[s] !== 0 && this.lists[this.moreAt[s]! - 1]!.includes(id));
  }

  /** A slot's owners after the first (undefined: it has one). */
  private extra(s: number): number[] | undefined {
    const at = this.moreAt[s]!;
    return at === 0 ? undefined : this.lists[at - 1];
  }

  /** The slot is back to one owner (or gone): its list is freed for reuse. */
  private dropExtra(s: number): void {
    const at = this.moreAt[s]!;
    this.lists[at - 1] = NO_OWNERS;
    this.freeLists.push(at - 1);
    this.moreAt[s] = 0;
  }

  /** Append an owner to a slot's list (the slot does not hold it yet). */
  private addOwner(s: number, id: number): void {
    const at = this.moreAt[s]!;
    if (at !== 0) this.lists[at - 1]!.push(id);
    else {
      const free = this.freeLists.pop();
      if (free === undefined) this.moreAt[s] = this.lists.push([id]);
      else {
        this.lists[free] = [id];
        this.moreAt[s] = free + 1;
      }
    }
    this.owners[s]!++;
    this.held[id]!++;
  }

  /**
   * Longest prefix of `keys` held by an available backend. The walk stops at the first node with
   * no available owner (subset invariant). `isAvailable` gets trie ids (see idOf).
   */
  match(keys: ArrayLike<number>, isAvailable: (id: number) => boolean): PrefixMatch {
    let best = NONE;
    let depth = 0;
    let parentOwners = -1;
    const limit = Math.min(keys.length, this.maxChunks);
    if (this.walked.length < limit) this.walked = new Int32Array(limit);
    const walked = this.walked;
    this.walkedKeys = keys;
    this.walkedAt = this.mutations;
    let seen = 0;
    let all = true;
    for (let i = 0; i < limit; i++) {
      const s = this.lookup(keys[i]!);
      if (s === NONE) break;
      walked[seen++] = s;
      const owners = this.owners[s]!;
      // Same owner count as the parent means the same owners (subset invariant): same answer.
      // Down a shared system prompt held by every backend this keeps the walk O(1) per chunk.
      // Otherwise one available owner is enough to go on; who they all are is read at the end.
      if (owners !== parentOwners) {
        if (!this.anyAvailable(s, isAvailable)) {
          all = false;
          break;
        }
        parentOwners = owners;
      }
      best = s;
      depth = i + 1;
    }
    this.walkedCount = seen;
    this.walkedAll = all;
    if (best === NONE) return NO_MATCH;
    const first = this.owner[best]!;
    const owners = isAvailable(first) ? [first] : [];
    const more = this.extra(best);
    if (more !== undefined)
      for (let j = 0; j < more.length; j++) {
        const o = more[j]!;
        if (isAvailable(o)) owners.push(o);
      }
    return { chunks: depth, chars: depth * this.chunkChars, owners };
  }

  /** Forget a backend: it leaves every node; nodes left without owners go (with their subtrees). */
  removeBackend(name: string): void {
    const id = this.ids.get(name);
    if (id === undefined) return;
    const dead: number[] = [];
    for (let s = this.head; s !== NONE; s = this.next[s]!) {
      const more = this.extra(s);
      if (this.owner[s] === id) {
        if (more === undefined) {
          dead.push(s);
          continue;
        }
        // The second owner becomes the first.
        this.owner[s] = more.shift()!;
      } else {
        const at = more === undefined ? -1 : more.indexOf(id);
        if (at < 0) continue;
        more!.splice(at, 1);
      }
      this.owners[s]!--;
      this.held[id]!--;
      if (more!.length === 0) this.dropExtra(s);
    }
    // Ownerless nodes form whole subtrees (subset invariant): removing them all leaves no orphan.
    for (const s of dead) this.remove(s);
    this.ids.delete(name);
    this.idChanges++;
    this.names[id] = undefined;
    this.freeIds.push(id);
  }

  /**
   * Nodes that list a backend, by trie id: how much of the tree it holds (SGLang's router sends a
   * request with no good match to the backend with the smallest tree). O(1).
   */
  heldBy(id: number): number {
    return id < this.held.length ? this.held[id]! : 0;
  }

  /** Nodes that list a backend (for describe / tests). O(size). */
  countFor(name: string): number {
    const id = this.ids.get(name);
    if (id === undefined) return 0;
    let c = 0;
    for (let s = this.head; s !== NONE; s = this.next[s]!) if (this.holds(s, id)) c++;
    return c;
  }

  /** Checks every invariant; throws on the first broken one (tests). O(size). */
  checkInvariants(): void {
    const pos = new Map<number, number>();
    let listed = 0;
    for (let s = this.head; s !== NONE; s = this.next[s]!) {
      if (pos.has(s)) throw new Error('LRU list has a cycle');
      pos.set(s, listed++);
    }
    for (const [s, i] of pos) {
      if (this.lookup(this.key[s]!) !== s) throw new Error('listed node not in the table');
      const owners = this.ownersOf(s);
      if (owners.length === 0 || owners[0] === NONE) throw new Error('node without owners');
      if (new Set(owners).size !== owners.length) throw new Error('owner listed twice');
      for (const id of owners) if (this.names[id] === undefined) throw new Error('owner id not live');
      const p = this.parent[s]!;
      if (p === NONE) continue;
      if (!pos.has(p)) throw new Error('parent gone before its child');
      if (!(pos.get(p)! > i)) throw new Error('parent before child in the LRU list');
      const parentOwners = this.ownersOf(p);
      for (const id of owners) if (!parentOwners.includes(id)) throw new Error('owners not a subset');
    }
    if (listed !== this.count) throw new Error(`size ${this.count} but ${listed} nodes listed`);
    let inTable = 0;
    for (const t of this.table) if (t !== 0) inTable++;
    if (inTable !== this.count) throw new Error(`${inTable} table entries for ${this.count} nodes`);
    if (this.count > this.maxEntries) throw new Error('over the bound');
    const counted = new Map<number, number>();
    for (const s of pos.keys())
      for (const id of this.ownersOf(s)) counted.set(id, (counted.get(id) ?? 0) + 1);
    for (let id = 0; id < this.held.length; id++)
      if (this.held[id] !== (counted.get(id) ?? 0))
        throw new Error(
          `backend id ${id} holds ${counted.get(id) ?? 0} nodes but is counted at ${this.held[id]}`,
        );
  }

  private ownersOf(s: number): number[] {
    const out = [this.owner[s]!, ...(this.extra(s) ?? [])];
    if (out.length !== this.owners[s]) throw new Error('owner count out of step with the owner list');
    return out;
  }

  private anyAvailable(s: number, isAvailable: (id: number) => boolean): boolean {
    if (isAvailable(this.owner[s]!)) return true;
    const more = this.extra(s);
    if (more === undefined) return false;
    for (let j = 0; j < more.length; j++) if (isAvailable(more[j]!)) return true;
    return false;
  }

  private lookup(k: number): number {
    const table = this.table;
    const mask = this.mask;
    if (table.length === 0) return NONE;
    for (let i = home(k, mask); ; i = (i + 1) & mask) {
      const t = table[i]!;
      if (t === 0) return NONE;
      if (this.key[t - 1] === k) return t - 1;
    }
  }

  /** A new live slot for key `k` under `parent`, owned by `id` (not yet in the LRU list). */
  private create(k: number, parent: number, id: number): number {
    let s: number;
    if (this.freeCount > 0) s = this.freeSlots[--this.freeCount]!;
    else {
      if (this.used === this.capacity) this.grow();
      s = this.used++;
    }
    this.key[s] = k;
    this.parent[s] = parent;
    this.prev[s] = this.next[s] = NONE;
    this.owner[s] = id;
    this.owners[s] = 1;
    this.held[id]!++;
    const table = this.table;
    const mask = this.mask;
    let i = home(k, mask);
    while (table[i] !== 0) i = (i + 1) & mask;
    table[i] = s + 1;
    this.count++;
    return s;
  }

  /** Double the slot arrays (up to slotLimit) and rebuild the table at most half full. */
  private grow(): void {
    const cap = Math.min(this.slotLimit, Math.max(INITIAL_SLOTS, this.capacity * 2));
    const widen = <T extends Float64Array | Int32Array>(a: T, make: (n: number) => T): T => {
      const b = make(cap);
      b.set(a);
      return b;
    };
    this.key = widen(this.key, (n) => new Float64Array(n));
    this.parent = widen(this.parent, (n) => new Int32Array(n));
    this.prev = widen(this.prev, (n) => new Int32Array(n));
    this.next = widen(this.next, (n) => new Int32Array(n));
    this.owner = widen(this.owner, (n) => new Int32Array(n));
    this.owners = widen(this.owners, (n) => new Int32Array(n));
    this.moreAt = widen(this.moreAt, (n) => new Int32Array(n));
    this.freeSlots = widen(this.freeSlots, (n) => new Int32Array(n));
    this.capacity = cap;
    let size = 1;
    while (size < cap * 2) size *= 2;
    this.table = new Int32Array(size);
    this.mask = size - 1;
    for (let s = 0; s < this.used; s++) {
      if (this.owners[s] === 0) continue;
      let i = home(this.key[s]!, this.mask);
      while (this.table[i] !== 0) i = (i + 1) & this.mask;
      this.table[i] = s + 1;
    }
  }

  private idFor(name: string): number {
    let id = this.ids.get(name);
    if (id === undefined) {
      id = this.freeIds.pop() ?? this.names.length;
      if (id >= this.held.length) {
        const grown = new Int32Array(this.held.length * 2);
        grown.set(this.held);
        this.held = grown;
      }
      this.idChanges++;
      this.ids.set(name, id);
      this.names[id] = name;
    }
    return id;
  }

  private moveToTail(s: number): void {
    if (this.tail === s) return;
    if (this.prev[s] !== NONE || this.head === s) this.detach(s);
    this.prev[s] = this.tail;
    this.next[s] = NONE;
    if (this.tail !== NONE) this.next[this.tail] = s;
    else this.head = s;
    this.tail = s;
  }

  private detach(s: number): void {
    const p = this.prev[s]!;
    const n = this.next[s]!;
    if (p !== NONE) this.next[p] = n;
    else this.head = n;
    if (n !== NONE) this.prev[n] = p;
    else this.tail = p;
    this.prev[s] = this.next[s] = NONE;
  }

  /** Drop one node (a leaf by the invariants, or part of a subtree being dropped whole). */
  private remove(s: number): void {
    this.mutations++;
    // Backward-shift deletion: later entries of the probe run move up, so no tombstones pile up.
    const table = this.table;
    const mask = this.mask;
    let i = home(this.key[s]!, mask);
    while (table[i] !== s + 1) i = (i + 1) & mask;
    for (let j = (i + 1) & mask; table[j] !== 0; j = (j + 1) & mask) {
      const h = home(this.key[table[j]! - 1]!, mask);
      // The entry at j may fill the hole at i unless its home lies cyclically in (i, j].
      const stays = i <= j ? h > i && h <= j : h > i || h <= j;
      if (stays) continue;
      table[i] = table[j]!;
      i = j;
    }
    table[i] = 0;
    this.detach(s);
    this.held[this.owner[s]!]!--;
    const more = this.extra(s);
    if (more !== undefined) {
      for (let j = 0; j < more.length; j++) this.held[more[j]!]!--;
      this.dropExtra(s);
    }
    this.owners[s] = 0;
    this.freeSlots[this.freeCount++] = s;
    this.count--;
  }
}
