import { z } from 'zod';
import type { Filter, PluginContext } from '../../framework/plugin.js';
import { parseParams } from '../../framework/params.js';

const Params = z.strictObject({});

/**
 * llm-d's decode-filter keeps the endpoints that decode (role `decode` or `both`, or no role
 * label at all). llmlb's backends carry no prefill/decode role: every one decodes, so the filter
 * keeps them all. It is here so that llm-d's configs, which put it first in every profile, load
 * as written (docs/kubernetes.md).
 */
export function decodeFilter(ctx: PluginContext): Filter {
  parseParams(Params, ctx.params, ctx.name);
  return {
    kind: 'filter',
    type: 'decode-filter',
    name: ctx.name,
    traits: { hold: 'load', holdsIgnoreMetrics: true, readsMetrics: false },
    filter: (_req, candidates) => candidates,
  };
}
