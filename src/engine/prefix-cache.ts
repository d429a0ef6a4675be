/**
 * The engine's prefix cache: an LRU set of prompt-block hashes (hash chains, see
 * `promptBlockHashes`). A Map keeps insertion order, so "touch" is delete + set and the least
 * recently used block is the first key.
 */
export class PrefixCache {
  private readonly blocks = new Map<string, true>();

  constructor(readonly capacity: number) {}

  get size(): number {
    return this.blocks.size;
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
      if (!this.blocks.delete(h) && this.blocks.size >= this.capacity) {
        const oldest = this.blocks.keys().next();
        if (!oldest.done) this.blocks.delete(oldest.value);
      }
      this.blocks.set(h, true);
    }
  }
}
