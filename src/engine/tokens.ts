/**
 * The project's one tokenizer convention and the prompt-block hashes of the prefix cache. Pure and
 * allocation-light: the router (prefix index) and the engines call these on every request.
 *
 * Convention: a token is 4 characters, so a text of n chars is ceil(n/4) tokens. It is not a real
 * tokenizer, but router, engine and simulator all agree on it, which is what the numbers need.
 */

// One flattening rule for chat messages, shared with the router's prefix index (src/core/prompt.ts).
export { flattenMessages, promptText } from '../core/prompt.js';

/** Characters per token under our convention. */
export const CHARS_PER_TOKEN = 4;

/** Tokens in `text`: ceil(chars / 4), 0 for ''. */
export function countTokens(text: string): number {
  return Math.ceil(text.length / CHARS_PER_TOKEN);
}

/**
 * A prompt block's hash: an integer below 2^53 (exact in a double), so caches key on numbers —
 * no string per block, no string hashing. Equal hashes ⇔ equal block chains (up to collisions,
 * about one in 10^16 per pair).
 */
export type BlockHash = number;

/** 2^21: a hash is its high lane (32 bits) times this plus 21 bits of its low lane. */
const LOW = 0x200000;

/**
 * Hash chain over the full blocks of `text` (a block is `blockSize` tokens = blockSize·4 chars; a
 * trailing partial block is not hashed, since its content can still change as the prompt grows).
 * Block i's hash covers all text up to the end of block i: h_i = hash(h_{i-1} ‖ chunk_i), so two
 * prompts share hash i exactly when they share their first i+1 blocks.
 *
 * The hash is cyrb53-style (two 32-bit Math.imul lanes, 53 bits kept), seeded with the previous
 * block's hash instead of concatenating strings — no node:crypto, no copies.
 */
export function promptBlockHashes(text: string, blockSize: number): BlockHash[] {
  return extendBlockHashes([], text, blockSize);
}

/**
 * The hash chain over `text`'s full blocks, given `prefix`: the chain of its first prefix.length
 * blocks (as promptBlockHashes gave it for a text that starts the same way). Only the blocks after
 * them are hashed, resuming from the last one's state — how the engine extends a prompt's chain over
 * the answer it generates without hashing the prompt again. Returns a new array.
 */
export function extendBlockHashes(
  prefix: readonly BlockHash[],
  text: string,
  blockSize: number,
): BlockHash[] {
  const blockChars = Math.floor(blockSize) * CHARS_PER_TOKEN;
  if (blockChars <= 0) return [];
  const blocks = Math.floor(text.length / blockChars);
  const from = Math.min(prefix.length, blocks);
  const out = new Array<BlockHash>(blocks);
  for (let b = 0; b < from; b++) out[b] = prefix[b]!;
  // The chain state is the previous hash itself: its high lane and its low 21 bits.
  const last = from > 0 ? out[from - 1]! : 0;
  let p2 = Math.floor(last / LOW);
  let p1 = last - p2 * LOW;
  for (let b = from; b < blocks; b++) {
    let h1 = 0xdeadbeef ^ p1;
    let h2 = 0x41c6ce57 ^ p2;
    const end = (b + 1) * blockChars;
    for (let i = b * blockChars; i < end; i++) {
      const ch = text.charCodeAt(i);
      h1 = Math.imul(h1 ^ ch, 2654435761);
      h2 = Math.imul(h2 ^ ch, 1597334677);
    }
    h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
    h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
    p1 = (h1 >>> 0) & (LOW - 1);
    p2 = h2 >>> 0;
    out[b] = p2 * LOW + p1;
  }
  return out;
}

/**
 * How a follow-up request resends an answer: chat messages are flattened with '\n' between them
 * (src/core/prompt.ts), so the text after a prompt and its answer is `prompt + '\n' + answer`.
 * The chain of that text's full blocks is what the engine can cache when the sequence finishes.
 */
export function contextBlockHashes(
  prompt: string,
  promptHashes: readonly BlockHash[],
  answer: string,
  blockSize: number,
): BlockHash[] {
  return extendBlockHashes(promptHashes, `${prompt}\n${answer}`, blockSize);
}

/** A block hash as 14 hex digits (trace files write hashes as strings). */
export function blockHashHex(h: BlockHash): string {
  return h.toString(16).padStart(14, '0');
}

/** Three-letter words: each generated token is one word plus a space, i.e. exactly 4 chars. */
const WORDS = [
  'lor', 'ips', 'dol', 'sit', 'ame', 'con', 'sec', 'adi', 'eli', 'sed', 'eiu', 'tem', 'inc', 'lab', 'mag',
  'ali', 'qua', 'eni', 'min', 'ven', 'nos', 'exe', 'ull', 'lab', 'nis', 'aut', 'iru', 'rep', 'vol', 'vel',
  'ess', 'cil',
] as const; // prettier-ignore
const TOKEN_TEXTS: readonly string[] = WORDS.map((w) => `${w} `);

/** One generated token's text: a word and a space (4 chars, so countTokens sums exactly). */
export function outputWord(rng: () => number): string {
  return TOKEN_TEXTS[Math.floor(rng() * TOKEN_TEXTS.length) % TOKEN_TEXTS.length]!;
}

/** Deterministic filler for `tokens` generated tokens; countTokens(outputText(rng, n)) === n. */
export function outputText(rng: () => number, tokens: number): string {
  let s = '';
  for (let i = 0; i < tokens; i++) s += outputWord(rng);
  return s;
}

/**
 * An output length when no hint says it: geometric with the given mean (many short answers, a
 * long tail — the shape of chat answer lengths), at least 1.
 */
export function drawOutputTokens(rng: () => number, mean: number): number {
  if (!(mean > 1)) return 1;
  const u = rng();
  return 1 + Math.floor(Math.log(1 - u) / Math.log(1 - 1 / mean));
}
