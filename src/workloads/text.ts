/**
 * Deterministic prompt text, sized in tokens under the project's convention (1 token = 4 chars,
 * `countTokens` in src/engine/tokens.ts).
 *
 * Speed matters (thousands of prompts of up to ~10k tokens in milliseconds), so a pool of words is
 * built once per seed and prompts are slices of it (V8 slices share the pool's memory). Every word
 * is three letters plus a space, so `n` tokens of filler are exactly `4n` characters. A slice alone
 * could repeat another request's opening by chance, which would fake prefix sharing; callers put a
 * unique tag (the request id) before the filler so prompts share only the prefixes they mean to.
 */
import { createRng, deriveSeed } from '../core/rng.js';
import { CHARS_PER_TOKEN } from '../engine/tokens.js';

// Common three-letter English words: the filler reads like (odd) prose and is 4 chars per word.
const WORDS = (
  'the and for are but not you all any can had her was one our out day get has him his how man new ' +
  'now old see two way who boy did its let put say she too use set run top map key log row end far ' +
  'few big low own yes yet ask try why ago fix job net sum add cut lot per via may off law war art ' +
  'age air car cat dog eye fit gas hot ice leg mix oil pay red sea six sky sun tax ten win'
).split(' ');

// Each word and its space as one 32-bit value, bytes in memory order (a pool is one write a word).
const WORD_BYTES = new Uint32Array(Uint8Array.from(Buffer.from(WORDS.join(' ') + ' ', 'latin1')).buffer);
if (CHARS_PER_TOKEN !== 4 || WORDS.some((w) => w.length !== 3))
  throw new Error('words are 3 letters + space');

const POOL_TOKENS = 1 << 15; // 32k tokens = 128 KiB: longer than any single filler we slice
const pools = new Map<number, string>();

/** The seed's word pool (cached: drivers for several policies share it). */
function pool(seed: number): string {
  let p = pools.get(seed);
  if (p === undefined) {
    const rng = createRng(deriveSeed(seed, 'text-pool'));
    // Bytes, decoded once: joining 32k small strings cost ~8 ms a seed (a simulation's setup).
    const words = new Uint32Array(POOL_TOKENS);
    for (let i = 0; i < POOL_TOKENS; i++) words[i] = WORD_BYTES[Math.floor(rng() * WORDS.length)]!;
    p = Buffer.from(words.buffer).toString('latin1');
    if (pools.size >= 16) pools.delete(pools.keys().next().value!);
    pools.set(seed, p);
  }
  return p;
}

/** Filler text from one seed's pool. */
export class TextSource {
  private readonly pool: string;

  constructor(seed: number) {
    this.pool = pool(seed);
  }

  /**
   * Exactly `chars` characters of filler (0 → ''), starting at a random word; it ends on a word
   * boundary (a space) when `chars` is a multiple of 4.
   */
  chars(rng: () => number, chars: number): string {
    if (chars <= 0) return '';
    const p = this.pool;
    const start = Math.floor(rng() * POOL_TOKENS) * CHARS_PER_TOKEN;
    if (start + chars <= p.length) return p.slice(start, start + chars);
    // Wrap around (and repeat for very long fillers).
    let out = p.slice(start);
    while (out.length + p.length < chars) out += p;
    return out + p.slice(0, chars - out.length);
  }

  /** Exactly `tokens` tokens of filler (4·tokens chars). */
  tokens(rng: () => number, tokens: number): string {
    return this.chars(rng, Math.max(0, tokens) * CHARS_PER_TOKEN);
  }

  /**
   * `head + filler + tail` padded with filler so that, plus `reserve` characters the caller adds
   * around it (e.g. a '\n' joining messages), it is exactly `tokens` tokens (4·tokens chars); when
   * head and tail alone are longer, they are returned as is.
   */
  fill(rng: () => number, tokens: number, head: string, tail = '', reserve = 0): string {
    const room = tokens * CHARS_PER_TOKEN - head.length - tail.length - reserve;
    return room > 0 ? head + this.chars(rng, room) + tail : head + tail;
  }
}

const DEFAULT_INTRO = 'You are a helpful assistant. Follow the instructions below carefully.';

/**
 * A system prompt of exactly `tokens` tokens: an instruction sentence then filler; `variant` picks
 * one of several distinct prompts (tenants/applications), each the same for every request using it.
 */
export function systemPrompt(seed: number, tokens: number, variant = 0, intro = DEFAULT_INTRO): string {
  if (tokens <= 0) return '';
  const src = new TextSource(seed);
  const rng = createRng(deriveSeed(seed, `system-prompt:${variant}`));
  const head = `${intro} (profile ${variant}) `;
  return src.fill(rng, tokens, head.length < tokens * CHARS_PER_TOKEN ? head : '');
}
