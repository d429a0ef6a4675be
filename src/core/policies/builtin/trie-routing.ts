import { z } from 'zod';
import { CandidateIds } from '../../prefix/candidate-ids.js';
import { PrefixTrie } from '../../prefix/prefix-trie.js';
import type { RequestInfo } from '../../types.js';

/** The trie parameters of the pickers that route on a prefix trie (spread into their schemas). */
export const trieParams = {
  /**
   * Characters per trie chunk (the router has no tokenizer: it matches characters). 64 is about
   * one 16-token KV block of vLLM, the granularity at which an engine can reuse a prefix anyway.
   */
  chunkChars: z.number().int().positive().max(4096).default(64),
  /** Most trie nodes kept (each covers chunkChars characters); least recently used leaves go first. */
  maxEntries: z.number().int().positive().default(100_000),
  /** Characters of a prompt indexed; the rest is neither matched nor stored. */
  maxPrefixChars: z.number().int().positive().default(32_768),
};

/** Request ids whose chunk keys are kept between pick and dispatch (held requests are re-picked). */
const MAX_CACHED = 4096;

/**
 * A picker's prefix trie of what it pushed where, the candidate marks for its picks, and each
 * request's chunk keys, computed once and kept from pick to dispatch (a request held in the router
 * queue by selective pushing is picked again and again).
 */
export class TrieRouting {
  readonly trie: PrefixTrie;
  readonly marks: CandidateIds;
  /**
   * The request hashed last and its keys, a view of `buffer`: a pick is almost always followed by
   * that request's dispatch, so this one slot serves it with no map operation and no allocation.
   */
  private lastId: string | undefined;
  private lastKeys: Float64Array = new Float64Array(0);
  private buffer = new Float64Array(64);
  /** Keys of other requests picked but not dispatched yet (copies: the buffer is reused). */
  private readonly keyCache = new Map<string, Float64Array>();

  constructor(p: { chunkChars: number; maxEntries: number; maxPrefixChars: number }) {
    this.trie = new PrefixTrie({
      chunkChars: p.chunkChars,
      maxEntries: p.maxEntries,
      maxPrefixChars: p.maxPrefixChars,
    });
    this.marks = new CandidateIds(this.trie);
  }

  /** The chunk keys of a request's prompt (valid until keys of another request are asked for). */
  keysOf(req: RequestInfo): Float64Array {
    const id = req.id;
    if (id === this.lastId) return this.lastKeys;
    let k = this.keyCache.size > 0 ? this.keyCache.get(id) : undefined;
    if (k !== undefined) this.keyCache.delete(id);
    if (this.lastId !== undefined) {
      // The previous request was picked but not dispatched (held): keep a copy of its keys.
      if (this.keyCache.size >= MAX_CACHED) this.keyCache.delete(this.keyCache.keys().next().value!);
      this.keyCache.set(this.lastId, this.lastKeys.slice());
    }
    if (k === undefined) {
      const text = req.promptText;
      const n = this.trie.keyCount(text);
      if (this.buffer.length < n) this.buffer = new Float64Array(Math.max(n, this.buffer.length * 2));
      k = this.trie.keys(text, this.buffer);
    }
    this.lastId = id;
    this.lastKeys = k;
    return k;
  }

  /** The request was pushed to `backend`: the trie learns its prompt; its keys are no longer kept. */
  dispatched(req: RequestInfo, backend: string): void {
    this.trie.insert(this.keysOf(req), backend);
    this.lastId = undefined;
  }
}
