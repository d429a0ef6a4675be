/**
 * A backend's model listing read as the fleet routes it: OpenAI's /v1/models (vLLM lists a LoRA
 * adapter with `parent`, the base model it runs on) or Ollama's /api/tags (kept whole, so the
 * router's own /api/tags can show the union).
 */
import type { TagEntry } from './fleet.js';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

export interface ModelList {
  /** /api/tags entries: the backend's own (Ollama), or made up from the names (OpenAI). */
  readonly tags: TagEntry[];
  /** Every name a client may use for one of its models. */
  readonly names: string[];
  /** The names that are LoRA adapters. */
  readonly adapters: string[];
}

/** The models in a listing's body; anything that is not one is skipped. */
export function parseModelList(api: 'openai' | 'ollama', body: unknown): ModelList {
  const tags: TagEntry[] = [];
  const names: string[] = [];
  const adapters: string[] = [];
  if (api === 'openai') {
    const data = isObj(body) && Array.isArray(body.data) ? body.data : [];
    for (const m of data) {
      if (!isObj(m) || typeof m.id !== 'string') continue;
      names.push(m.id);
      if (typeof m.parent === 'string' && m.parent !== '' && m.parent !== m.id) adapters.push(m.id);
    }
    for (const n of names) tags.push(syntheticTag(n));
  } else {
    const models = isObj(body) && Array.isArray(body.models) ? body.models : [];
    for (const m of models) {
      if (!isObj(m) || typeof m.name !== 'string') continue;
      tags.push(m as TagEntry);
      names.push(m.name);
      // Ollama resolves a bare name to ':latest'; accept both spellings from clients.
      if (m.name.endsWith(':latest')) names.push(m.name.slice(0, -':latest'.length));
    }
  }
  return { tags, names, adapters };
}

/** An /api/tags entry for a model known by name only (an OpenAI backend's, or a configured one). */
export function syntheticTag(name: string): TagEntry {
  return {
    name,
    model: name,
    modified_at: new Date(0).toISOString(),
    size: 0,
    digest: '',
    details: {},
  };
}
