import type { RequestInfo } from '../../../types.js';
import { PrefixCredit, type PromptKeys } from '../../shared/prefix-credit.js';

/** Characters per chunk of the credit's record (the router has no tokenizer). */
export const CHUNK_CHARS = 64;
/** Prompt characters indexed (256k tokens of text at 4 characters a token). */
const MAX_PREFIX_CHARS = 1 << 20;
/** Largest prefix cache learned per backend, in tokens. */
const MAX_CACHE_TOKENS = 1 << 26;
/**
 * Learned cache, per prefix counted on and found gone: shrunk by 3 % while such misses are the
 * exception. Gently, because not every miss is the cache's size: a prefix recorded at dispatch is
 * not in the engine until that request is admitted and prefilled (a re-read queued behind it finds
 * nothing yet), and one that waited inside may find its prefix evicted meanwhile. Measured
 * (prefix-conversations-8 at ×2, mean E2E): a fifth per miss 73.5 s, 5 % 53.3 s, 2 % 45.1 s, no
 * learning 47.8 s; documents 37.7 / 31.2 / 33.8 / 31.8 s. When most predictions miss (an engine
 * that keeps a few prompts, as llama.cpp's slots do, or none), by a fifth: 3 % a miss took a hundred
 * answers to learn a 1M-token guess down to a 5k-token cache.
 */
const SHRINK = 0.97;
const SHRINK_FAST = 0.8;
/** Weight of each answer in the share of predictions that missed (per backend). */
const MISS_ALPHA = 0.1;

/**
 * The estimated-wait policy's use of prefix credit (prefix-credit.ts): which share of a request's
 * prompt a backend likely holds in its prefix cache (what this router sent it), and so how many
 * prompt tokens it would prefill there. `share` (the policy's prefixCredit, 0–1) is the part of
 * the cached prefix not charged; at 0 nothing is recorded and every backend prefills the whole
 * prompt.
 *
 * How much each engine keeps is sized in TOKENS (issue #30: a size in characters was a different
 * cache for real text, 4 characters a token, than for a trace's stand-in text, 8 tokens a
 * character) and learned per backend from what the engine reports it found cached (usage
 * cached_tokens): a prefix the record counted on that the engine no longer had shrinks it, more
 * found than the record remembered grows it. An engine without a prefix cache so shrinks it to
 * almost nothing within a few dozen answers; one that reports nothing keeps `initialTokens`.
 */
export class CachedPrefix {
  private readonly credit: PrefixCredit | undefined;
  /** Per backend: the prompt tokens its engine keeps, as learned. */
  private readonly cacheTokens = new Map<string, number>();
  /** Per backend whose engine says how many tokens its cache holds: that size (capTo). */
  private readonly reported = new Map<string, number>();
  /** Per backend: the recent share of predicted prefixes the engine did not have (EMA). */
  private readonly missRate = new Map<string, number>();
  /**
   * Per backend whose answers do not say what was cached but whose metrics count prefix-cache
   * hits: the counters at the window's start, and the tokens predicted cached and prompted since.
   */
  private readonly windows = new Map<string, CounterWindow>();

  constructor(
    private readonly share: number,
    /** Prompt tokens an engine is assumed to keep until it says otherwise. */
    private readonly initialTokens: number,
    initialTokensPerChar = 0.25,
    /**
     * A record of the same prompts whose per-backend tables this one shares (the affinity memory
     * shares the learned record's): a prompt recorded in both is inserted once.
     */
    shareWith?: CachedPrefix,
  ) {
    this.credit =
      share > 0
        ? new PrefixCredit({
            chunkChars: CHUNK_CHARS,
            capacityChunks: chunksFor(initialTokens, initialTokensPerChar),
            maxPrefixChars: MAX_PREFIX_CHARS,
            ...(shareWith?.credit !== undefined ? { shareTablesWith: shareWith.credit } : {}),
          })
        : undefined;
  }

  /** A request's prompt chunk keys for the credit (none: no credit, or no backend holds any of it). */
  keysOf(req: RequestInfo): PromptKeys | undefined {
    return this.credit === undefined || req.promptText.length === 0
      ? undefined
      : this.credit.keysOf(req.id, req.promptText);
  }

  /** Prompt tokens of a request (its `keys`: keysOf) in the prefix `backend` likely holds cached. */
  cachedOf(req: RequestInfo, keys: PromptKeys | undefined, backend: string, promptTokens: number): number {
    if (keys === undefined || keys.length === 0) return 0;
    const chars = this.credit!.cachedChars(backend, keys);
    return chars === 0 ? 0 : promptTokens * Math.min(1, chars / req.promptText.length);
  }

  /** Tokens to prefill when `cached` of `promptTokens` are likely cached: less the share credited. */
  creditedPrefill(promptTokens: number, cached: number): number {
    return cached === 0 ? promptTokens : Math.max(1, promptTokens - this.share * cached);
  }

  /**
   * The request was pushed to `backend`: it now likely holds the prompt's prefix. The record keeps
   * as many chunks as the engine's learned cache holds at `tokensPerChar`. `keys`: the prompt's keys
   * from another CachedPrefix's keysOf (the same chunking), so they are not hashed again.
   */
  record(id: string, backend: string, promptText: string, tokensPerChar: number, keys?: PromptKeys): void {
    const credit = this.credit;
    if (credit === undefined) return;
    credit.setCapacity(backend, chunksFor(this.cacheTokensOf(backend), tokensPerChar));
    credit.record(id, backend, promptText, keys);
  }

  /**
   * The engine reported `actual` prompt tokens found cached for a request of `prompt` tokens for
   * which the record predicted `predicted`: a prefix counted on and gone (less than half of it
   * found) shrinks the learned cache (SHRINK, or SHRINK_FAST while most predictions miss); more
   * found than predicted (by two chunks or a tenth of the prompt) grows it by a quarter.
   */
  learn(backend: string, predicted: number, actual: number, prompt: number, tokensPerChar: number): void {
    if (this.credit === undefined) return;
    // An answer, not a decision: the backend's table drops forgotten keys here, ahead of need.
    this.credit.maintain(backend);
    if (!(actual >= 0) || !(predicted >= 0)) return;
    const now = this.cacheTokensOf(backend);
    const chunkTokens = CHUNK_CHARS * tokensPerChar;
    const missed = predicted > 0 && actual < 0.5 * predicted;
    let next = now;
    if (predicted > 0) {
      const rate = this.missRate.get(backend) ?? 0;
      const r = rate + MISS_ALPHA * ((missed ? 1 : 0) - rate);
      this.missRate.set(backend, r);
      if (missed) next = Math.max(2 * chunkTokens, now * (r > 0.5 ? SHRINK_FAST : SHRINK));
    }
    if (!missed && actual > predicted + Math.max(2 * chunkTokens, 0.1 * prompt))
      next = Math.min(MAX_CACHE_TOKENS, this.reported.get(backend) ?? Infinity, now * 1.25);
    if (next !== now) this.cacheTokens.set(backend, next);
  }

  /**
   * For engines whose answers do not report cached tokens but whose metrics count prefix-cache
   * queries and hits (vLLM's counters, in tokens): an answer with `predicted` of its `prompt`
   * tokens credited joins the backend's window; once the counters have moved, the window is learned
   * from as one request would be — the engine's hit share over the window times the prompt tokens
   * answered in it, against what was predicted — and a new one starts. Counters that went back (a
   * restarted engine) start a new window.
   */
  learnFromCounters(
    backend: string,
    queries: number,
    hits: number,
    predicted: number,
    prompt: number,
    tokensPerChar: number,
  ): void {
    if (this.credit === undefined || !(queries >= 0) || !(hits >= 0) || !(predicted >= 0) || !(prompt > 0))
      return;
    const w = this.windows.get(backend);
    if (w === undefined || queries < w.queries || hits < w.hits) {
      this.windows.set(backend, { queries, hits, predicted: 0, prompt: 0 });
      return;
    }
    w.predicted += predicted;
    w.prompt += prompt;
    const dq = queries - w.queries;
    if (dq <= 0) return;
    const share = Math.min(1, (hits - w.hits) / dq);
    this.learn(backend, w.predicted, share * w.prompt, w.prompt, tokensPerChar);
    this.windows.set(backend, { queries, hits, predicted: 0, prompt: 0 });
  }

  /**
   * `backend`'s engine says its cache holds `tokens` prompt tokens (vLLM's cache_config_info,
   * llama.cpp's /props): the learned size is never more (issue #30: learning down from a 1M-token
   * guess to a llama.cpp engine's ~5k took longer than a run).
   */
  capTo(backend: string, tokens: number): void {
    if (!(tokens > 0) || this.reported.get(backend) === tokens) return;
    this.reported.set(backend, tokens);
    const now = this.cacheTokens.get(backend);
    if (now !== undefined && now > tokens) this.cacheTokens.set(backend, tokens);
  }

  /** Prompt tokens `backend`'s engine is taken to keep cached (learned, or the initial size; at most what it reports). */
  cacheTokensOf(backend: string): number {
    const learned = this.cacheTokens.get(backend) ?? this.initialTokens;
    const cap = this.reported.get(backend);
    return cap !== undefined && cap < learned ? cap : learned;
  }

  removeBackend(name: string): void {
    this.credit?.removeBackend(name);
    this.cacheTokens.delete(name);
    this.reported.delete(name);
    this.missRate.delete(name);
    this.windows.delete(name);
  }

  /** Chunks remembered for `backend` (undefined: credit off). */
  chunksOf(backend: string): number | undefined {
    return this.credit?.sizeOf(backend);
  }

  /** Bytes of `backend`'s table (shared with the record it shares tables with). */
  bytesOf(backend: string): number {
    return this.credit?.bytesOf(backend) ?? 0;
  }
}

interface CounterWindow {
  queries: number;
  hits: number;
  predicted: number;
  prompt: number;
}

/** Record chunks for a cache of `tokens` tokens at `tokensPerChar` (at least 2: two generations). */
function chunksFor(tokens: number, tokensPerChar: number): number {
  return Math.max(2, Math.round(tokens / (CHUNK_CHARS * tokensPerChar)));
}
