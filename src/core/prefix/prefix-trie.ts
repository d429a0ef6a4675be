/**
 * Approximate prefix trie over request text (seed 003 §3.2, after SGLang's approximate radix tree):
 * the text is cut into fixed-size character chunks, each chunk hashed, and each node of the path
 * records the backends a request with that prefix was pushed to. It remembers what the router sent
 * where, not what an engine really kept in its KV cache — decisions never wait for an engine.
 *
 * Nodes live in one map keyed by the chain hash of their prefix (chunk i's key covers chunks
 * 0..i), so a node needs no child table — the cheapest layout per entry — and a walk is one map
 * lookup per chunk.
 *
 * Invariants:
 * - A child's owners are a subset of its parent's (an insert records the backend on every node of
 *   its path; eviction removes leaves; a backend is removed from every node), so a walk can stop at
 *   the first node with no available owner: nothing deeper can have one.
 * - The LRU list runs from least to most recently inserted-through, and a parent always comes after
 *   all its children (a path is touched leaf first, root last), so the list head is always a leaf
 *   and evicting from the head never orphans a subtree.
 */

/** Trie node (one chunk of one prefix). */
interface Node {
  /** Chain hash of the prefix ending with this chunk (its key in the node map). */
  readonly key: number;
  /** undefined for a first chunk. */
  readonly parent: Node | undefined;
  /** Backend ids that were sent this prefix, in the order they were first sent it. */
  owners: number[];
  /** LRU list links (least recent at `head`). */
  prev: Node | undefined;
  next: Node | undefined;
}

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

export class PrefixTrie {
  readonly chunkChars: number;
  readonly maxEntries: number;
  readonly maxPrefixChars: number;
  private readonly nodes = new Map<number, Node>();
  private head: Node | undefined;
  private tail: Node | undefined;
  private readonly ids = new Map<string, number>();
  private readonly names: (string | undefined)[] = [];
  private readonly freeIds: number[] = [];
  constructor(opts: PrefixTrieOptions) {
    for (const k of ['chunkChars', 'maxEntries', 'maxPrefixChars'] as const) {
      const v = opts[k];
      if (!Number.isInteger(v) || v <= 0) throw new Error(`prefix trie: ${k} must be a positive integer`);
    }
    this.chunkChars = opts.chunkChars;
    this.maxEntries = opts.maxEntries;
    this.maxPrefixChars = opts.maxPrefixChars;
  }

  /** Nodes held now (never more than maxEntries after an insert returns). */
  get size(): number {
    return this.nodes.size;
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

  /** Upper bound (exclusive) on ids handed out so far: size arrays indexed by id with it. */
  get idLimit(): number {
    return this.names.length;
  }

  /**
   * Chain hashes of a text's indexed chunks: key i covers chunks 0..i, so equal keys mean (up to
   * collisions) an equal prefix. Two 32-bit FNV-1a variants give a 53-bit key: with 100k nodes a
   * collision is a ~1e-6 event, and it would only cost one misrouted request. Compute once per
   * request and reuse.
   */
  keys(text: string): Float64Array {
    const n = Math.floor(Math.min(text.length, this.maxPrefixChars) / this.chunkChars);
    const out = new Float64Array(n);
    const size = this.chunkChars;
    let h1 = 0x811c9dc5;
    let h2 = 0x01000193;
    for (let b = 0; b < n; b++) {
      // Two characters per step (one 32-bit word): half the multiplies of a per-character loop.
      let i = b * size;
      const end = i + size;
      for (; i + 1 < end; i += 2) {
        const c = text.charCodeAt(i) | (text.charCodeAt(i + 1) << 16);
        h1 = Math.imul(h1 ^ c, 0x01000193);
        h2 = Math.imul(h2 ^ c, 0x5bd1e995) ^ (h2 >>> 15);
      }
      if (i < end) {
        const c = text.charCodeAt(i);
        h1 = Math.imul(h1 ^ c, 0x01000193);
        h2 = Math.imul(h2 ^ c, 0x5bd1e995) ^ (h2 >>> 15);
      }
      // FNV-1a on whole words mixes high bits poorly: finalise each key (chain state untouched).
      let f = h1 ^ (h1 >>> 16);
      f = Math.imul(f, 0x85ebca6b);
      f ^= f >>> 13;
      out[b] = (f >>> 0) * 0x200000 + ((h2 ^ (h2 >>> 11)) & 0x1fffff);
    }
    return out;
  }

  /**
   * Record that a request with these chunk keys was pushed to `backend`: every node of its path
   * gets the backend and becomes most recently used; then the oldest leaves are evicted until the
   * size bound holds.
   */
  insert(keys: ArrayLike<number>, backend: string): void {
    const n = Math.min(keys.length, this.maxEntries);
    if (n === 0) return;
    const id = this.idFor(backend);
    let node: Node | undefined;
    let absent = false;
    for (let i = 0; i < n; i++) {
      const k = keys[i]!;
      const found = this.nodes.get(k);
      if (!found) {
        // A literal one-element array: most nodes only ever have one owner (no spare capacity).
        node = { key: k, parent: node, owners: [id], prev: undefined, next: undefined };
        this.nodes.set(k, node);
        continue;
      }
      node = found;
      const o = found.owners;
      // A node without the backend has no descendant with it (subset invariant): below it, push
      // without looking. Otherwise the common repeat (same backend as last time) is the last entry.
      if (!absent && (o[o.length - 1] === id || o.includes(id))) continue;
      absent = true;
      o.push(id);
    }
    // Touch leaf first, root-most last (through parent links): parents end up more recent.
    for (let x = node; x; x = x.parent) this.moveToTail(x);
    while (this.nodes.size > this.maxEntries) this.remove(this.head!);
  }

  /**
   * Longest prefix of `keys` held by an available backend. The walk stops at the first node with
   * no available owner (subset invariant). `isAvailable` gets trie ids (see idOf).
   */
  match(keys: ArrayLike<number>, isAvailable: (id: number) => boolean): PrefixMatch {
    let best: number[] | undefined;
    let depth = 0;
    let parentOwners = -1;
    for (let i = 0; i < keys.length; i++) {
      const node = this.nodes.get(keys[i]!);
      if (!node) break;
      const o = node.owners;
      // Same owner count as the parent means the same owners (subset invariant): reuse the answer.
      // Down a shared system prompt held by every backend this keeps the walk O(1) per chunk.
      if (o.length !== parentOwners) {
        let avail: number[] | undefined;
        for (let j = 0; j < o.length; j++) {
          const id = o[j]!;
          if (isAvailable(id)) (avail ??= []).push(id);
        }
        if (!avail) break;
        best = avail;
        parentOwners = o.length;
      }
      depth = i + 1;
    }
    return best ? { chunks: depth, chars: depth * this.chunkChars, owners: best } : NO_MATCH;
  }

  /** Forget a backend: it leaves every node; nodes left without owners go (with their subtrees). */
  removeBackend(name: string): void {
    const id = this.ids.get(name);
    if (id === undefined) return;
    const dead: Node[] = [];
    for (let n = this.head; n; n = n.next) {
      const at = n.owners.indexOf(id);
      if (at >= 0) n.owners.splice(at, 1);
      if (n.owners.length === 0) dead.push(n);
    }
    // Ownerless nodes form whole subtrees (subset invariant): removing them all leaves no orphan.
    for (const n of dead) this.remove(n);
    this.ids.delete(name);
    this.names[id] = undefined;
    this.freeIds.push(id);
  }

  /** Nodes that list a backend (for describe / tests). O(size). */
  countFor(name: string): number {
    const id = this.ids.get(name);
    if (id === undefined) return 0;
    let c = 0;
    for (let n = this.head; n; n = n.next) if (n.owners.includes(id)) c++;
    return c;
  }

  /** Checks every invariant; throws on the first broken one (tests). O(size). */
  checkInvariants(): void {
    const pos = new Map<Node, number>();
    let count = 0;
    for (let n = this.head; n; n = n.next) pos.set(n, count++);
    for (const [n, i] of pos) {
      if (this.nodes.get(n.key) !== n) throw new Error('listed node not in the map');
      if (n.owners.length === 0) throw new Error('node without owners');
      for (const id of n.owners) if (this.names[id] === undefined) throw new Error('owner id not live');
      const p = n.parent;
      if (!p) continue;
      if (this.nodes.get(p.key) !== p) throw new Error('parent gone before its child');
      if (!(pos.get(p)! > i)) throw new Error('parent before child in the LRU list');
      for (const id of n.owners) if (!p.owners.includes(id)) throw new Error('owners not a subset');
    }
    if (count !== this.nodes.size) throw new Error(`size ${this.nodes.size} but ${count} nodes listed`);
    if (this.nodes.size > this.maxEntries) throw new Error('over the bound');
  }

  private idFor(name: string): number {
    let id = this.ids.get(name);
    if (id === undefined) {
      id = this.freeIds.pop() ?? this.names.length;
      this.ids.set(name, id);
      this.names[id] = name;
    }
    return id;
  }

  private moveToTail(n: Node): void {
    if (this.tail === n) return;
    if (n.prev || this.head === n) this.detach(n);
    n.prev = this.tail;
    n.next = undefined;
    if (this.tail) this.tail.next = n;
    else this.head = n;
    this.tail = n;
  }

  private detach(n: Node): void {
    if (n.prev) n.prev.next = n.next;
    else this.head = n.next;
    if (n.next) n.next.prev = n.prev;
    else this.tail = n.prev;
    n.prev = n.next = undefined;
  }

  /** Drop one node (a leaf by the invariants, or part of a subtree being dropped whole). */
  private remove(n: Node): void {
    this.nodes.delete(n.key);
    this.detach(n);
  }
}
