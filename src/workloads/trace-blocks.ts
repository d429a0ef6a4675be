/**
 * Prompts known only by their length and a chain of block ids (Mooncake `hash_ids`, llmlb's own
 * capture): no text was recorded, and materialising e.g. 100k-token prompts as text would cost
 * memory and hashing time in proportion to the trace. Such a request carries
 *   - `promptTokens`: its exact length (the simulator uses it instead of counting the text), and
 *   - `prefixBlocks`: one chain hash per trace block (equal hash i ⇔ equal first i+1 blocks),
 * plus a short stand-in text for the router (one character per STAND_IN_TOKENS_PER_CHAR tokens),
 * built from the same chain hashes, so requests sharing trace blocks share a text prefix that the
 * prefix policies (trie, prefix-cache scorer, consistent hashing) see, and length-based estimators
 * see a length proportional to the prompt.
 */
import type { BlockHash } from '../engine/tokens.js';
import type { PrefixBlocks } from './types.js';

/** Tokens one character of a stand-in text represents (a 512-token Mooncake block is 64 chars). */
export const STAND_IN_TOKENS_PER_CHAR = 8;

/** 53-bit mix of a chain state and a value (two Math.imul lanes, as in engine/tokens.ts). */
function mix(state: number, value: number): number {
  const lo = state >>> 0;
  const hi = Math.floor(state / 0x100000000) >>> 0;
  let h1 = 0xdeadbeef ^ lo ^ value;
  let h2 = 0x41c6ce57 ^ hi ^ Math.floor(value / 0x100000000);
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (h2 >>> 0) * 0x200000 + ((h1 >>> 0) & 0x1fffff);
}

/** A string id as a number (FNV-1a over its characters), so string and numeric ids chain alike. */
function idValue(id: string | number): number {
  if (typeof id === 'number') return id;
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/**
 * Chain hashes of a trace's block ids: hash i covers ids 0..i, so requests agree on hash i exactly
 * when they agree on their first i+1 ids (whether or not the trace's ids were already chained).
 */
export function chainBlockIds(ids: readonly (string | number)[]): number[] {
  const out = new Array<number>(ids.length);
  let h = 0;
  for (let i = 0; i < ids.length; i++) out[i] = h = mix(h, idValue(ids[i]!));
  return out;
}

/** A unique chain state for a request's blocks that no trace id covers (seeded by its id). */
export function uniqueState(requestId: string, seed: number): number {
  return mix(mix(seed, 0x7ace), idValue(requestId));
}

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';

function standInChars(state: number, chars: number): string {
  // 10 base-32 characters from the state, repeated: all a block's characters depend on its hash.
  let word = '';
  let v = state;
  for (let i = 0; i < 10; i++) {
    word += ALPHABET[v % 32];
    v = Math.floor(v / 32);
  }
  return chars <= word.length
    ? word.slice(0, chars)
    : word.repeat(Math.ceil(chars / word.length)).slice(0, chars);
}

/**
 * The router's stand-in text for a prompt of `promptTokens` tokens: block i (blockTokens tokens,
 * the last one possibly partial) becomes ceil(tokens/8) characters drawn from its chain hash;
 * tokens past the trace's blocks draw from `tail` (unique to the request).
 */
export function standInText(blocks: PrefixBlocks, promptTokens: number, tail: number): string {
  const { blockTokens, chain } = blocks;
  const parts: string[] = [];
  let covered = 0;
  for (let i = 0; i < chain.length && covered < promptTokens; i++) {
    const tokens = Math.min(blockTokens, promptTokens - covered);
    parts.push(standInChars(chain[i]!, Math.ceil(tokens / STAND_IN_TOKENS_PER_CHAR)));
    covered += tokens;
  }
  if (covered < promptTokens)
    parts.push(standInChars(tail, Math.ceil((promptTokens - covered) / STAND_IN_TOKENS_PER_CHAR)));
  return parts.join('');
}

/**
 * The engine's prompt-block hashes (blockSize tokens each, full blocks only, as
 * engine/tokens.ts's promptBlockHashes gives for text) for a request known by its trace blocks:
 * engine block e ends at token (e+1)·blockSize, inside trace block k; its hash is trace block k's
 * chain hash mixed with that offset, so two requests share engine block e exactly when they share
 * the trace blocks it reaches into. Past the trace's blocks, `tail` (unique to the request) is used.
 */
export function engineBlockHashes(
  blocks: PrefixBlocks,
  promptTokens: number,
  tail: number,
  blockSize: number,
): BlockHash[] {
  const size = Math.floor(blockSize);
  if (size <= 0) return [];
  const n = Math.floor(promptTokens / size);
  const out = new Array<BlockHash>(n);
  const { blockTokens, chain } = blocks;
  // Only when engine blocks tile a trace block are its sub-hashes cached; otherwise a straddling
  // block ends at offsets that are not multiples of size, computed directly.
  const subs = blockTokens % size === 0 ? subCache(blockTokens, size) : undefined;
  let e = 0;
  // Whole runs of engine blocks inside one trace block come from the cache (turns of a
  // conversation resend the same trace blocks: the same hashes serve every turn).
  for (let k = 0; e < n; k++) {
    const lastEnd = Math.min((k + 1) * blockTokens, n * size);
    const inTrace = k < chain.length;
    const within = subs && inTrace ? subHashes(subs, chain[k]!, blockTokens, size) : undefined;
    for (; e < n && (e + 1) * size <= lastEnd; e++) {
      const off = (e + 1) * size - k * blockTokens;
      out[e] = within ? within[off / size - 1]! : mix(inTrace ? chain[k]! : mix(tail, k), off);
    }
    // An engine block that straddles trace blocks k and k+1 ends in k+1: handled next round.
  }
  return out;
}

/** Engine sub-block hashes of trace blocks, per (blockTokens, blockSize), each map bounded. */
const subCaches = new Map<number, Map<number, BlockHash[]>>();
const SUB_CACHE_MAX = 100_000;

function subCache(blockTokens: number, size: number): Map<number, BlockHash[]> {
  // Both are integers far below 2^26: one number keys the pair.
  const key = blockTokens * 0x4000000 + size;
  let m = subCaches.get(key);
  if (!m) subCaches.set(key, (m = new Map()));
  return m;
}

function subHashes(
  m: Map<number, BlockHash[]>,
  state: number,
  blockTokens: number,
  size: number,
): BlockHash[] {
  let subs = m.get(state);
  if (!subs) {
    if (m.size >= SUB_CACHE_MAX) m.clear();
    subs = new Array<BlockHash>(blockTokens / size);
    for (let j = 0; j < subs.length; j++) subs[j] = mix(state, (j + 1) * size);
    m.set(state, subs);
  }
  return subs;
}
