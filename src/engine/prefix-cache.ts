/**
 * The engine's prefix cache: an LRU set of prompt-block hashes (hash chains, see
 * `promptBlockHashes`). A Map from hash to a node of a doubly linked list ordered from least to
 * most recently used: touch and evict are O(1). (Evicting through a Map's insertion order made V8
 * walk every deleted entry on each eviction — a third of a big simulation's time.)
 */
interface Node {
  readonly key: string;
  prev: Node | undefined;
  next: Node | undefined;
}

export class PrefixCache {
  private readonly blocks = new Map<string, Node>();
  /** Least recently used. */
  private head: Node | undefined;
  /** Most recently used. */
  private tail: Node | undefined;

  constructor(readonly capacity: number) {}

  get size(): number {
    return this.blocks.size;
  }

  has(hash: string): boolean {
    return this.blocks.has(hash);
  }

  /** Take a block out (it is in use elsewhere: not evictable, not counted here). */
  delete(hash: string): void {
    const node = this.blocks.get(hash);
    if (!node) return;
    this.unlink(node);
    this.blocks.delete(hash);
  }

  /** Evict least recently used blocks until at most `n` remain. */
  evictTo(n: number): void {
    while (this.blocks.size > n && this.head) {
      const oldest = this.head;
      this.unlink(oldest);
      this.blocks.delete(oldest.key);
    }
  }

  /** Blocks in the longest prefix of `hashes` that is cached (a chain: stop at the first miss). */
  match(hashes: readonly string[]): number {
    if (this.capacity <= 0) return 0;
    let n = 0;
    while (n < hashes.length && this.blocks.has(hashes[n]!)) n++;
    return n;
  }

  /**
   * Insert or touch all of `hashes`. Walked last-to-first so a chain's first block ends up most
   * recently used: eviction then eats chains from their tails, never orphaning a chain's later
   * blocks behind an evicted head (vLLM frees blocks in the same reverse order).
   */
  insert(hashes: readonly string[]): void {
    if (this.capacity <= 0) return;
    for (let i = hashes.length - 1; i >= 0; i--) {
      const h = hashes[i]!;
      const node = this.blocks.get(h);
      if (node) {
        this.unlink(node);
        this.append(node);
        continue;
      }
      if (this.blocks.size >= this.capacity && this.head) {
        const oldest = this.head;
        this.unlink(oldest);
        this.blocks.delete(oldest.key);
      }
      const fresh: Node = { key: h, prev: undefined, next: undefined };
      this.blocks.set(h, fresh);
      this.append(fresh);
    }
  }

  private unlink(n: Node): void {
    if (n.prev) n.prev.next = n.next;
    else this.head = n.next;
    if (n.next) n.next.prev = n.prev;
    else this.tail = n.prev;
    n.prev = n.next = undefined;
  }

  private append(n: Node): void {
    n.prev = this.tail;
    if (this.tail) this.tail.next = n;
    else this.head = n;
    this.tail = n;
  }
}
