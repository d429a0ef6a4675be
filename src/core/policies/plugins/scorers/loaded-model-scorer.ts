import { z } from 'zod';
import type { PluginContext, Scorer } from '../../framework/plugin.js';
import { parseParams } from '../../framework/params.js';

const Params = z.strictObject({});

/**
 * Prefers backends that already hold the request's model in memory (Ollama /api/ps): loading a
 * model costs seconds to minutes, far more than any queue difference. 1 loaded, 0 not loaded,
 * 0.5 when the backend does not say (vLLM serves what it was started with).
 */
export function loadedModelScorer(ctx: PluginContext): Scorer {
  parseParams(Params, ctx.params, ctx.name);
  return {
    kind: 'scorer',
    type: 'loaded-model-scorer',
    name: ctx.name,
    score(req, candidates, _now, out) {
      for (let i = 0; i < candidates.length; i++) {
        const loaded = candidates[i]!.loadedModels;
        out[i] = loaded === undefined ? 0.5 : loaded.has(req.model) ? 1 : 0;
      }
    },
  };
}
