/**
 * The engine model (design §3): how one LLM inference server batches sequences and how long an
 * iteration takes. Pure — it is driven by a clock it is given: the emulated engine (`llmlb engine`)
 * drives it in real time, the simulator in virtual time. Times here are SECONDS of model time.
 */
import type { BlockHash } from './tokens.js';

export interface EngineProfile {
  /** Most sequences in the running batch (Ollama NUM_PARALLEL; vLLM max_num_seqs). */
  readonly slots: number;
  /** Prompt + generated tokens of running sequences must fit; a sequence that doesn't fit waits. */
  readonly kvCapacityTokens: number;
  /** Hardware multiplier: every step's duration is divided by it (CPU node ~0.03–0.1). */
  readonly speed: number;
  /** Fixed cost of one decode iteration, s. */
  readonly baseStepS: number;
  /** Cost per running sequence per iteration, s. */
  readonly perSeqS: number;
  /** Cost per context token (prompt + generated, all running sequences) per iteration, s. */
  readonly perTokenS: number;
  /** Prefill cost per uncached prompt token, paid in the iteration that admits the sequence, s. */
  readonly prefillPerTokenS: number;
  /** Tokens per prefix-cache block. */
  readonly blockSize: number;
  /** Prefix-cache capacity in blocks (LRU); 0 disables the cache. */
  readonly prefixCacheBlocks: number;
  /**
   * How the prefix cache is kept (default 'blocks'):
   * - 'blocks': an LRU of `prefixCacheBlocks` blocks, shared by every sequence (vLLM, SGLang).
   * - 'slots': llama.cpp's server: each of the `slots` keeps only the last sequence it ran (prompt
   *   and answer), nothing is shared between slots, and a sequence takes the free slot whose kept
   *   blocks share the longest prefix with its prompt (least recently used on a tie) and prefills
   *   only what that slot lacks. `prefixCacheBlocks` > 0 turns it on (its size is unused).
   */
  readonly cacheMode?: 'blocks' | 'slots' | undefined;
  /**
   * Paged KV with prefix sharing, as vLLM and SGLang do it (default false: the simpler model). Running
   * sequences whose prompts start with the same full blocks hold ONE copy of those blocks, so they
   * use KV only for what is their own; and the prefix cache lives in the KV pool: it keeps only
   * blocks nobody is using, in whatever room the running batch leaves (least recently used
   * go first), at most prefixCacheBlocks. Without it every running sequence holds its whole prompt
   * and the cache is a separate store of prefixCacheBlocks. With it a batch that outgrows the pool
   * while decoding is preempted (vLLM's recompute), newest first.
   */
  readonly pagedKv?: boolean | undefined;
  /**
   * How prefill shares an iteration with decode (default 'mixed'):
   * - 'mixed': a newly admitted prompt is prefilled whole in the same iteration in which every
   *   running sequence decodes a token (the simple model; Ollama / llama.cpp continuous batching).
   * - 'stall': vLLM v0's default scheduler (no chunked prefill): an iteration that admits prompts
   *   runs only their prefill; running sequences generate nothing in it, so each arrival stalls the
   *   whole batch for its prefill (the performance-aware router §3, Fig. 1a's latency spikes).
   * - 'chunked': vLLM chunked prefill / Sarathi-Serve: each iteration has a budget of
   *   `maxBatchedTokens`; every decoding sequence takes one token of it first, prompts are prefilled
   *   in chunks from what is left, and a sequence emits its first token in the iteration that
   *   finishes its prompt.
   */
  readonly prefillMode?: 'mixed' | 'stall' | 'chunked' | undefined;
  /** 'chunked': tokens per iteration (vLLM max_num_batched_tokens; default 512, vLLM's chunked default). */
  readonly maxBatchedTokens?: number | undefined;
  /** LoRA adapters on the engine's base model (vLLM --enable-lora); absent: none. */
  readonly lora?: LoraProfile | undefined;
}

/**
 * LoRA serving as vLLM does it: a request whose model is an adapter runs only while its adapter
 * holds one of `maxLora` GPU slots. Admitting it when its adapter is not loaded takes a slot — a free
 * one, else the least recently used adapter that no running sequence uses — and the iteration that
 * admits it pays `swapS` for the load. While every slot holds an adapter some running sequence uses,
 * a request for another adapter waits and later waiting requests go ahead of it (vLLM's scheduler
 * skips it).
 */
export interface LoraProfile {
  /** Adapter slots (vLLM --max-loras), >= 1. */
  readonly maxLora: number;
  /** Seconds to load an adapter into a slot (not divided by `speed`: disk / host-memory bound). */
  readonly swapS: number;
  /** The adapters the engine serves (names a request may give as its model). */
  readonly adapters?: readonly string[] | undefined;
}

/** One sequence submitted to the engine. */
export interface EngineSequence {
  readonly id: string;
  /** Prompt length in tokens. */
  readonly promptTokens: number;
  /**
   * Hash chain of the prompt's full blocks (block i's hash covers blocks 0..i), for the prefix
   * cache; may be empty. Build it with `promptBlockHashes`.
   */
  readonly blockHashes: readonly BlockHash[];
  /** Tokens the engine will generate (already capped by num_predict / max_tokens), >= 1. */
  readonly outputTokens: number;
  /**
   * Hash chain of the full blocks of the prompt followed by its answer (`contextBlockHashes`): the
   * text a follow-up turn resends. When the sequence finishes, these blocks join the prefix cache,
   * as vLLM (v1) and SGLang cache generated tokens too, so a next turn or a tree's child can hit its
   * parent's answer. Absent: only the prompt's blocks are cached.
   */
  readonly contextBlockHashes?: readonly BlockHash[] | undefined;
  /** The host's own number for the sequence, handed back in its 'finished' event (default -1). */
  readonly ref?: number | undefined;
  /**
   * The model the request named. Only a LoRA engine reads it: a name in `lora.adapters` runs on
   * that adapter; anything else (or absent) runs on the base model.
   */
  readonly model?: string | undefined;
}

/**
 * Something that happened at time `t` (seconds): admissions at the start of an iteration, tokens and
 * finishes at its end.
 */
export type EngineEvent =
  /** The sequence joined the running batch; `t` is the start of the iteration that prefills it. */
  | { readonly type: 'admitted'; readonly id: string; readonly t: number; readonly cachedTokens: number }
  /** `total` output tokens now exist for the sequence (one more per iteration; the first ends prefill). */
  | { readonly type: 'tokens'; readonly id: string; readonly t: number; readonly total: number }
  | {
      readonly type: 'finished';
      readonly id: string;
      /** EngineSequence.ref. */
      readonly ref: number;
      readonly t: number;
      readonly promptTokens: number;
      readonly outputTokens: number;
      readonly cachedTokens: number;
      /** Time from submit to admission (queueing inside the engine), s. */
      readonly queuedS: number;
      /** Prefill time (the admitting iteration), s. */
      readonly prefillS: number;
      /** Decode time after the first token, s. */
      readonly decodeS: number;
    };

export interface EngineStats {
  readonly running: number;
  readonly waiting: number;
  /** KV tokens in use / capacity, in [0, 1]. */
  readonly kvUsage: number;
  readonly prefixCacheQueries: number;
  readonly prefixCacheHits: number;
  readonly completed: number;
  /** pagedKv: sequences preempted (freed and requeued for recompute) because the batch outgrew the KV pool. */
  readonly preemptions: number;
  readonly generatedTokens: number;
  readonly promptTokens: number;
  /** LoRA: adapters loaded into a slot so far (each one paid `swapS`). */
  readonly loraLoads: number;
}

/** vLLM's `vllm:lora_requests_info` labels: adapters of running and of waiting requests. */
export interface LoraInfo {
  readonly maxLora: number;
  /** Adapters some running sequence uses. */
  readonly running: readonly string[];
  /** Adapters some waiting sequence asks for. */
  readonly waiting: readonly string[];
  /** Adapters holding a slot (running ones and idle ones not evicted yet), least recently used first. */
  readonly loaded: readonly string[];
}
