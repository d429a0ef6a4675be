/**
 * `/api/show` answers the same whichever backend serves it: an Ollama-API backend answers it
 * natively (details, architecture, context length); an OpenAI-API backend's answer is synthesized
 * from its /v1/models entry, which says less. So while an Ollama-API backend that serves the
 * model can take the request, the OpenAI-API ones are kept out of it.
 */
import type { BackendView } from '../core/types.js';

/**
 * The OpenAI-API backends serving `model` to avoid for /api/show, given the backends this try
 * must avoid anyway (`skip`: tried, cooling). Empty when no Ollama-API backend is left for it,
 * so the request falls back to whichever serves the model.
 */
export function showAvoids(
  views: readonly BackendView[],
  model: string,
  skip: ReadonlySet<string>,
): string[] {
  const serving = views.filter((b) => b.models.has(model) && !skip.has(b.name));
  const ollamaLeft = serving.some((b) => b.api === 'ollama' && b.healthy && !b.draining);
  return ollamaLeft ? serving.filter((b) => b.api === 'openai').map((b) => b.name) : [];
}
