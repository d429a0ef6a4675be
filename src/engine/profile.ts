/**
 * Default engine constants: Llama-2-7B-class model on one V100-class GPU, from the performance-aware router §3
 * (Figure 4) plus back-of-envelope hardware numbers.
 *
 * - prefillPerTokenS 3.2e-4: the performance-aware router's prefill gradient. It also matches compute: ~14 GFLOP per
 *   token for 7B parameters at ~45 TFLOP/s effective fp16.
 * - perSeqS 3.3e-5: the performance-aware router's decode gradient — each running sequence adds one decode token to
 *   every iteration, so "per decode token in the batch" is per sequence.
 * - baseStepS 0.018: decode is memory-bound; reading 14 GB of weights at ~900 GB/s is ~15 ms, plus
 *   launch/sampling overhead.
 * - perTokenS 6e-7: reading the KV cache, ~0.5 MB per context token (2·32 layers·4096·2 bytes) at
 *   ~900 GB/s.
 * So a 500-token prompt with a 200-token answer alone takes 500·3.2e-4 + 200·(0.018 + 3.3e-5 +
 * ~600·6e-7) ≈ 0.16 + 3.7 ≈ 3.9 s (about 54 tokens/s: a V100 serving a 7B model).
 * slots 4 is Ollama's usual NUM_PARALLEL; 16384 KV tokens is 4 × 4096-token contexts; blockSize 16
 * is vLLM's block size.
 */
import type { EngineProfile } from './types.js';

const DEFAULT_PROFILE: EngineProfile = {
  slots: 4,
  kvCapacityTokens: 16384,
  speed: 1,
  baseStepS: 0.018,
  perSeqS: 3.3e-5,
  perTokenS: 6e-7,
  prefillPerTokenS: 3.2e-4,
  blockSize: 16,
  prefixCacheBlocks: 4096,
};

/** The default profile with `overrides` applied (e.g. `{ slots: 8, speed: 0.05 }` for a CPU box). */
export function defaultProfile(overrides: Partial<EngineProfile> = {}): EngineProfile {
  return { ...DEFAULT_PROFILE, ...overrides };
}

/**
 * The performance-aware router's instance, Llama-2-7B under vLLM v0 on one V100, for the performance-aware router's scenarios:
 * - baseStepS 0.0155: 13.5 GB of fp16 weights read per iteration at ~90 % of the V100's 900 GB/s
 *   (GEMV-bound decode reaches that); with attention below, p = d = 1000 alone takes 17.5 s (seed
 *   §3 measured 17 s).
 * - perTokenS 1.1e-6: 0.5 MiB of KV per context token read at ~half of peak bandwidth — vLLM's
 *   paged-attention kernel on Volta (no FlashAttention there) is far from the GEMV's efficiency.
 * - prefillMode 'stall': vLLM v0 without chunked prefill schedules a prompt step with no decodes,
 *   so every arrival pauses the running batch for its prefill (seed §3, Fig. 1a's spikes).
 * - prefillPerTokenS 3.2e-4 and perSeqS 3.3e-5: the seed's own Fig. 4 gradients (as the default).
 * With these the seed's "p = d = 1000 with p = d = 500 arriving every 50 iterations" example
 * takes 26.8 s in the model (seed: 31 s); see model.test.ts.
 */
export const V100_LLAMA2_7B: Partial<EngineProfile> = {
  baseStepS: 0.0155,
  perTokenS: 1.1e-6,
  prefillMode: 'stall',
};
