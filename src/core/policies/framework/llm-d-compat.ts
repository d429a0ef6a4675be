/**
 * What llmlb does with an EndpointPickerConfig written for llm-d's picker (or the Gateway API
 * Inference Extension's): the apiVersions it is published under, the plugin types llm-d renamed
 * (the old names still load, with a deprecation warning, as llm-d's own loader does), the
 * plumbing plugins that have no work to do in llmlb (accepted and ignored, documented in
 * docs/kubernetes.md) and the llm-d plugins llmlb cannot run (a clear error naming them).
 */

/** The apiVersions an EndpointPickerConfig may carry (absent: llmlb's own `scheduling:` block). */
export const ENDPOINT_PICKER_API_VERSIONS = [
  'llm-d.ai/v1alpha1',
  'inference.networking.x-k8s.io/v1alpha1',
] as const;

/** Old plugin type → the name it has now (llm-d / GIE renames). */
export const RENAMED_PLUGIN_TYPES: ReadonlyMap<string, string> = new Map([
  ['kv-cache-scorer', 'kv-cache-utilization-scorer'],
  ['max-score', 'max-score-picker'],
  ['single-profile', 'single-profile-handler'],
  ['kvcache-aware-scorer', 'precise-prefix-cache-scorer'],
  ['pd-profile-handler', 'disagg-profile-handler'],
  ['prefill-header-handler', 'disagg-headers-handler'],
]);

/**
 * Plugins that only move data around inside llm-d's picker. llmlb does their work elsewhere
 * (it runs one profile per request, parses OpenAI and Ollama bodies itself, scrapes engine
 * metrics on its own), so they load and do nothing. A scheduling profile may not reference them.
 */
export const PLUMBING_PLUGIN_TYPES: ReadonlyMap<string, string> = new Map([
  ['single-profile-handler', 'llmlb runs the one profile that `policy:` names'],
  ['openai-parser', 'llmlb parses OpenAI and Ollama request bodies itself'],
  ['passthrough-parser', 'llmlb parses OpenAI and Ollama request bodies itself'],
  ['metrics-data-source', 'llmlb scrapes engine /metrics itself (health.scrapeIntervalMs)'],
  ['core-metrics-extractor', 'llmlb reads vLLM and SGLang metrics itself'],
]);

/** llm-d plugins llmlb has no equivalent for, and why. */
export const UNSUPPORTED_PLUGIN_TYPES: ReadonlyMap<string, string> = new Map([
  [
    'precise-prefix-cache-scorer',
    "it reads the engines' KV-cache events over ZMQ; use prefix-cache-scorer (router-side, approximate)",
  ],
  [
    'precise-prefix-cache-producer',
    "it reads the engines' KV-cache events over ZMQ; use prefix-cache-scorer",
  ],
  ['disagg-profile-handler', 'llmlb does not split prefill and decode (P/D disaggregation)'],
  ['disagg-headers-handler', 'llmlb does not split prefill and decode (P/D disaggregation)'],
  ['prefill-filter', 'llmlb does not split prefill and decode (P/D disaggregation)'],
  ['prefix-based-pd-decider', 'llmlb does not split prefill and decode (P/D disaggregation)'],
  ['lora-affinity-filter', 'llmlb does not track LoRA adapters per engine'],
]);

/** The plugin type a config's `type:` means now, and a deprecation warning when it is an old name. */
export function currentPluginType(type: string): { type: string; deprecated?: string } {
  const now = RENAMED_PLUGIN_TYPES.get(type);
  if (now === undefined) return { type };
  return { type: now, deprecated: `plugin type '${type}' is deprecated: use '${now}'` };
}
