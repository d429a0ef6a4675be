import type { BackendView } from '../types.js';
import type { PrefixTrie } from './prefix-trie.js';

/**
 * Which trie ids are among one pick's candidates, and at which position: typed arrays reused from
 * pick to pick (the loop over 1000 candidates is a pick's main cost, so no Set per decision).
 * A pick calls `mark`, then asks `isAvailable` (what PrefixTrie.match wants) and `position`.
 */
export class CandidateIds {
  private stamp = new Int32Array(64);
  private pos = new Int32Array(64);
  /** Trie id by registration index (-1: none, -2: not looked up since the trie's ids last changed). */
  private idByIndex = new Int32Array(64).fill(-2);
  private idVersion = -1;
  private epoch = 0;

  constructor(private readonly trie: PrefixTrie) {}

  /** True when trie id `id` is one of the candidates last marked. */
  readonly isAvailable = (id: number): boolean => this.stamp[id] === this.epoch;

  /** Index in the candidates last marked of an available trie id. */
  position(id: number): number {
    return this.pos[id]!;
  }

  /** The trie id of a candidate (-1 when the trie holds nothing for it); valid after `mark`. */
  idOf(b: BackendView): number {
    return this.idByIndex[b.index]!;
  }

  /** Start a pick over `candidates`. */
  mark(candidates: readonly BackendView[]): void {
    const trie = this.trie;
    if (this.stamp.length < trie.idLimit) {
      this.stamp = new Int32Array(trie.idLimit * 2);
      this.pos = new Int32Array(trie.idLimit * 2);
    }
    if (++this.epoch === 0x7fffffff) {
      this.stamp.fill(0);
      this.epoch = 1;
    }
    if (this.idVersion !== trie.idVersion) {
      this.idByIndex.fill(-2);
      this.idVersion = trie.idVersion;
    }
    const epoch = this.epoch;
    for (let i = 0; i < candidates.length; i++) {
      const b = candidates[i]!;
      if (b.index >= this.idByIndex.length) {
        const grown = new Int32Array(Math.max(b.index + 1, this.idByIndex.length * 2)).fill(-2);
        grown.set(this.idByIndex);
        this.idByIndex = grown;
      }
      let id = this.idByIndex[b.index]!;
      if (id === -2) this.idByIndex[b.index] = id = trie.idOf(b.name) ?? -1;
      if (id < 0) continue;
      this.stamp[id] = epoch;
      this.pos[id] = i;
    }
  }
}
