import { z } from 'zod';
import type { PluginContext, Scorer } from '../../framework/plugin.js';
import { parseParams } from '../../framework/params.js';
import { LORA_AFFINITY_SCORES, LoraSlots } from '../../shared/lora-slots.js';

const Params = z.strictObject({
  /** Adapter slots assumed where the engine does not export vllm:lora_requests_info (vLLM --max-loras). */
  maxLora: z.number().int().positive().default(4),
});

/**
 * llm-d's lora-affinity-scorer: for a request naming a LoRA adapter (BackendView.adapters), a
 * backend with the adapter running scores 1, one with a free adapter slot 0.8, one where requests
 * for it already wait for a slot 0.6, a full one 0. What is loaded comes from the engine's
 * `vllm:lora_requests_info` where it exports it, and from this router's own routing otherwise
 * (lora-slots.ts: the adapters in flight there and the last `maxLora` sent there count as
 * loaded). A request for a base model scores 1 everywhere.
 */
export function loraAffinityScorer(ctx: PluginContext): Scorer {
  const p = parseParams(Params, ctx.params, ctx.name);
  const slots = new LoraSlots(p.maxLora);
  return {
    kind: 'scorer',
    type: 'lora-affinity-scorer',
    name: ctx.name,
    score(req, candidates, _now, out) {
      for (let i = 0; i < candidates.length; i++) {
        const b = candidates[i]!;
        out[i] = b.adapters?.has(req.model) === true ? LORA_AFFINITY_SCORES[slots.place(req.model, b)]! : 1;
      }
    },
    onDispatch: (req, backend) => slots.onDispatch(req, backend),
    onComplete: (req, backend) => slots.onComplete(req, backend),
    onBackendRemoved: (name) => slots.onBackendRemoved(name),
  };
}
