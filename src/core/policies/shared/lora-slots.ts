import type { BackendView, RequestInfo } from '../../types.js';

/** Where a request's LoRA adapter stands on one backend (llm-d's lora-affinity-scorer cases). */
export const LORA_LOADED = 0;
/** Not loaded, but a slot is free (or held by an idle adapter): it loads at once. */
export const LORA_FREE_SLOT = 1;
/** Not loaded and no free slot, but requests for it already wait there (it loads when one frees). */
export const LORA_QUEUED = 2;
/** Not loaded, no free slot: it waits for one to free, then loads. */
export const LORA_FULL = 3;
export type LoraPlace = typeof LORA_LOADED | typeof LORA_FREE_SLOT | typeof LORA_QUEUED | typeof LORA_FULL;

/** Per backend: the adapters this router sent there, least recently sent first, with how many are in flight. */
type Sent = Map<string, number>;

/**
 * Which LoRA adapters each backend has loaded, as far as the router can tell (pure: no clock).
 * From the engine's `vllm:lora_requests_info` (EngineMetrics.lora: running and waiting adapters,
 * max_lora) where it exports it, and from the router's own routing: an adapter with requests in
 * flight there is loaded or about to be, and the engine keeps the `maxLora` most recently used
 * ones loaded (vLLM's LRU of adapter slots), so the last `maxLora` distinct adapters sent there
 * likely still are. Only requests naming an adapter (BackendView.adapters) are tracked.
 */
export class LoraSlots {
  private readonly sent = new Map<string, Sent>();

  /** `defaultMaxLora`: slots assumed where the engine does not say (vLLM --max-loras). */
  constructor(private readonly defaultMaxLora: number) {}

  /** Whether the request names a LoRA adapter on any of the candidates. */
  static anyAdapter(req: RequestInfo, candidates: readonly BackendView[]): boolean {
    for (let i = 0; i < candidates.length; i++)
      if (candidates[i]!.adapters?.has(req.model) === true) return true;
    return false;
  }

  onDispatch(req: RequestInfo, b: BackendView): void {
    if (b.adapters?.has(req.model) !== true) return;
    let s = this.sent.get(b.name);
    if (!s) this.sent.set(b.name, (s = new Map()));
    const n = s.get(req.model) ?? 0;
    s.delete(req.model);
    s.set(req.model, n + 1);
    // Keep only what can matter: the in-flight ones and the most recent others.
    if (s.size > 4 * this.maxLoraOf(b) + 8) {
      for (const [a, k] of s) {
        if (k === 0) {
          s.delete(a);
          break;
        }
      }
    }
  }

  onComplete(req: RequestInfo, b: BackendView): void {
    const s = this.sent.get(b.name);
    const n = s?.get(req.model);
    if (s && n !== undefined && n > 0) s.set(req.model, n - 1);
  }

  onBackendRemoved(name: string): void {
    this.sent.delete(name);
  }

  maxLoraOf(b: BackendView): number {
    return b.metrics?.lora?.maxLora ?? this.defaultMaxLora;
  }

  /** Where `adapter` stands on `b` (LORA_LOADED … LORA_FULL). */
  place(adapter: string, b: BackendView): LoraPlace {
    const max = this.maxLoraOf(b);
    const s = this.sent.get(b.name);
    const lora = b.metrics?.lora;
    // Busy slots: adapters with requests running or waiting there (the engine's word, plus what
    // this router has in flight there since).
    let busy = 0;
    let busyHas = false;
    let queued = false;
    if (lora) {
      const seen = new Set<string>(lora.running);
      for (const a of lora.waiting) seen.add(a);
      if (s) for (const [a, k] of s) if (k > 0) seen.add(a);
      busy = seen.size;
      busyHas = lora.running.includes(adapter);
      queued = lora.waiting.includes(adapter);
    } else if (s) {
      for (const k of s.values()) if (k > 0) busy++;
    }
    const inFlight = s?.get(adapter) ?? 0;
    if (busyHas) return LORA_LOADED;
    // In flight: loaded, or waiting for a slot where the engine says so.
    if (inFlight > 0 && !queued) return LORA_LOADED;
    // Loaded but idle: among the `max` most recently sent distinct adapters (newest last).
    if (s) {
      let k = 0;
      let rank = -1;
      for (const a of s.keys()) {
        if (a === adapter) rank = k;
        k++;
      }
      if (rank >= 0 && k - rank <= max) return LORA_LOADED;
    }
    if (busy < max) return LORA_FREE_SLOT;
    return queued || inFlight > 0 ? LORA_QUEUED : LORA_FULL;
  }
}

/** llm-d's lora-affinity-scorer scores: loaded 1, free slot 0.8, already queued 0.6, full 0. */
export const LORA_AFFINITY_SCORES: readonly number[] = [1, 0.8, 0.6, 0];
