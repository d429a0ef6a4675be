/**
 * The backlog benchmark's world (the quota-aware router): a "Models Backend" with 10 models whose per-prompt
 * latency spans 1 s–2 min, per-model traffic targets, and a backlog of unpinned prompts. Pure:
 * latencies and lengths are functions of (model, prompt), so the simulator and the live emulated
 * backend see the same work.
 */
/** Per-model targets, the shape of the quota core's QuotaLimits (config `quotas.models.<m>`). */
export interface ModelTargets {
  readonly weight: number;
  readonly maxConcurrent: number;
  readonly tokensPerMinute: number;
  readonly requestsPerMinute: number;
}

export interface BacklogModel {
  readonly name: string;
  /** Per-prompt latency range, model seconds (uniform in between, decided by a hash of the prompt). */
  readonly minS: number;
  readonly maxS: number;
  /** Targets the pipeline must stay under (per one-minute window / at any instant). */
  readonly limits: ModelTargets;
}

const m = (i: number, minS: number, maxS: number, maxConcurrent: number, rpm: number): BacklogModel => ({
  name: `model-${i}`,
  minS,
  maxS,
  // Weight ∝ requests per minute: when several models have room, WDRR shares by their size.
  limits: { weight: rpm, maxConcurrent, requestsPerMinute: rpm, tokensPerMinute: rpm * 400 },
});

/** Fast models get low concurrency but high request rates; slow ones the reverse. */
export const BACKLOG_MODELS: readonly BacklogModel[] = [
  m(0, 1, 3, 4, 60),
  m(1, 2, 6, 6, 60),
  m(2, 3, 10, 6, 45),
  m(3, 5, 15, 8, 40),
  m(4, 8, 25, 8, 30),
  m(5, 12, 35, 10, 30),
  m(6, 20, 50, 12, 20),
  m(7, 30, 70, 12, 15),
  m(8, 45, 90, 12, 12),
  m(9, 60, 120, 12, 10),
];

/** Answer tokens the solver assumes per prompt; every actual answer is at most this. */
export const ESTIMATED_OUTPUT_TOKENS = 256;

/** FNV-1a over a string, then a uniform [0, 1). */
export function hashUnit(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b) >>> 0;
  h ^= h >>> 13;
  return (h >>> 0) / 4294967296;
}

export function latencyS(model: BacklogModel, prompt: string): number {
  return model.minS + (model.maxS - model.minS) * hashUnit(`${model.name}|${prompt}`);
}

export const promptTokens = (prompt: string): number => Math.ceil(prompt.length / 4);

/** Actual answer length, 64–256 tokens. */
export const outputTokens = (prompt: string): number => 64 + Math.floor(hashUnit(`out|${prompt}`) * 193);

/** The solver's estimate (what admission charges): prompt tokens + the assumed answer. */
export const estimatedTokens = (prompt: string): number => promptTokens(prompt) + ESTIMATED_OUTPUT_TOKENS;

/** `n` distinct prompts of 80–600 characters. */
export function backlogPrompts(n: number): string[] {
  const words = [
    'solve',
    'classify',
    'summarise',
    'translate',
    'extract',
    'the',
    'invoice',
    'ticket',
    'review',
    'log',
  ];
  return Array.from({ length: n }, (_, i) => {
    const len = 80 + Math.floor(hashUnit(`len|${i}`) * 520);
    let s = `task ${i}:`;
    for (let k = 0; s.length < len; k++) s += ' ' + words[Math.floor(hashUnit(`${i}|${k}`) * words.length)];
    return s.slice(0, len);
  });
}
