/**
 * Ollama's /api/show for a model served by an OpenAI-API backend (vLLM, SGLang), written from the
 * backend's /v1/models answer: what Ollama clients read a model's context length, family and size
 * from. One of translate.ts's translations (`show`), apart because it reads a listing, not a
 * generation.
 */
type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Model families as Ollama names them (its `general.architecture`), found in a model's name. */
const FAMILY =
  /(llama|qwen\d*|mixtral|mistral|gemma\d*|phi\d*|deepseek\d*|granite|falcon|starcoder\d*|command-r)/i;
/** The parameter count in a model's name: `Llama-3.1-8B-Instruct` → 8B, `qwen2.5:0.5b` → 0.5B. */
const PARAMS = /(?:^|[^a-z0-9.])(\d+(?:\.\d+)?)b(?![a-z])/i;

/**
 * Ollama /api/show for a model an OpenAI backend lists, from its /v1/models entry: the context
 * length vLLM gives (`max_model_len`) where tools read it (`general.context_length`, and
 * `<architecture>.context_length` when the name tells the family), family and size from the name.
 */
export function showBody(model: string, text: string): string | undefined {
  let o: unknown;
  try {
    o = JSON.parse(text);
  } catch {
    return undefined;
  }
  const entry =
    isObj(o) && Array.isArray(o.data) ? o.data.find((m) => isObj(m) && m.id === model) : undefined;
  const root = isObj(entry) && typeof entry.root === 'string' ? entry.root : model;
  const maxLen = isObj(entry) && typeof entry.max_model_len === 'number' ? entry.max_model_len : undefined;
  const family = FAMILY.exec(root)?.[1]?.toLowerCase() ?? FAMILY.exec(model)?.[1]?.toLowerCase() ?? '';
  const params = PARAMS.exec(root)?.[1] ?? PARAMS.exec(model)?.[1];
  const info: Obj = {};
  if (family) info['general.architecture'] = family;
  if (maxLen !== undefined) {
    info['general.context_length'] = maxLen;
    if (family) info[`${family}.context_length`] = maxLen;
  }
  return JSON.stringify({
    modelfile: '',
    parameters: '',
    template: '',
    details: {
      parent_model: root === model ? '' : root,
      format: '',
      family,
      families: family ? [family] : null,
      parameter_size: params !== undefined ? `${params}B` : '',
      quantization_level: '',
    },
    model_info: info,
    capabilities: ['completion'],
    modified_at: new Date(0).toISOString(),
  });
}
