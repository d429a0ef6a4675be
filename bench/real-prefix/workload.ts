/**
 * The prefix-heavy client's requests: a few long "documents" that many requests re-read, each with
 * a short question of its own — RAG over a small corpus, or one system prompt per tenant. Drawn
 * from a seed, so every policy gets the same request sequence at the same times. The text is
 * printable ASCII, which the bench's tokenizer (gguf.ts) maps to one token per character.
 */
import { createRng } from '../../src/core/rng.js';

export interface PrefixWorkloadOptions {
  readonly seed: number;
  /** Distinct shared documents. */
  readonly documents: number;
  /** Document length range, in characters (= tokens). */
  readonly docMin: number;
  readonly docMax: number;
  /** Length of each request's own question, in characters. */
  readonly suffix: number;
  /** Poisson arrivals per second. */
  readonly rate: number;
  /** How many requests. */
  readonly requests: number;
}

export interface PrefixRequest {
  /** Seconds after the start of the run. */
  readonly at: number;
  readonly doc: number;
  readonly prompt: string;
}

const LETTERS = 'abcdefghijklmnopqrstuvwxyz';

function words(rng: () => number, length: number): string {
  let s = '';
  while (s.length < length) {
    const n = 2 + Math.floor(rng() * 8);
    for (let i = 0; i < n; i++) s += LETTERS[Math.floor(rng() * LETTERS.length)];
    s += rng() < 0.1 ? '. ' : ' ';
  }
  return s.slice(0, length);
}

/** The documents of a workload (also what warm-up sends). */
export function prefixDocuments(o: PrefixWorkloadOptions): string[] {
  const rng = createRng(o.seed);
  return Array.from({ length: o.documents }, (_, d) => {
    const len = o.docMin + Math.floor(rng() * (o.docMax - o.docMin + 1));
    return `Document ${d}:\n${words(rng, len)}\n`;
  });
}

/** The measured requests: Poisson arrivals, documents drawn uniformly, a fresh question each. */
export function prefixRequests(o: PrefixWorkloadOptions, docs: readonly string[]): PrefixRequest[] {
  const rng = createRng(o.seed ^ 0x5bd1e995);
  const out: PrefixRequest[] = [];
  let t = 0;
  for (let i = 0; i < o.requests; i++) {
    t += -Math.log(1 - rng()) / o.rate;
    const doc = Math.floor(rng() * docs.length);
    out.push({ at: t, doc, prompt: `${docs[doc]!}Question ${i}: ${words(rng, o.suffix)}?\nAnswer:` });
  }
  return out;
}
