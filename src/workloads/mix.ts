/**
 * Several client populations side by side (SkyLB §5's Mixed Tree: 2 clients sending 4-branch
 * trees beside 20 sending 2-branch ones). Each part is a workload of its own type and params, run
 * with its own derived seed (by position), so appending a part never changes what the others send. Follow-ups go
 * back to the part that sent the request.
 *
 * ```yaml
 * workload:
 *   type: mix
 *   parts:
 *     - { type: tree-of-thought, clients: 2, branching: 4, idPrefix: big }
 *     - { type: tree-of-thought, clients: 20, branching: 2, idPrefix: small }
 * ```
 * Request ids must not collide across parts (give each part its own `idPrefix`); a collision is
 * reported when it happens rather than silently routing a finish to the wrong part.
 */
import { z } from 'zod';
import { deriveSeed } from '../core/rng.js';
import { parseParams, positiveSeconds } from './common.js';
import type { ClientDriver, ScheduledRequest } from './types.js';

/** Resolves a part's `{ type, …params }` to a factory (the registry, passed in to avoid an import cycle). */
export type PartBinder = (
  spec: Record<string, unknown>,
) => { success: true; create: (seed: number) => ClientDriver } | { success: false; error: z.ZodError };

const PartSchema = z.looseObject({ type: z.string().min(1) });

export const mixParamsSchema = z.strictObject({
  parts: z.array(PartSchema).min(1),
  /** Handed to every part that takes one and gives none (the scenario fills it in). */
  durationS: positiveSeconds.optional(),
});
export type MixParams = z.input<typeof mixParamsSchema>;

/** Validate every part against its own type's schema; issues carry the part's path. */
export function checkMixParams(params: unknown, bind: PartBinder): z.ZodError | undefined {
  const r = mixParamsSchema.safeParse(params);
  if (!r.success) return r.error;
  const issues: z.core.$ZodIssue[] = [];
  r.data.parts.forEach((part, i) => {
    const b = bind(withDuration(part, r.data.durationS));
    if (!b.success) {
      for (const issue of b.error.issues) issues.push({ ...issue, path: ['parts', i, ...issue.path] });
    }
  });
  return issues.length > 0 ? new z.ZodError(issues) : undefined;
}

function withDuration(part: Record<string, unknown>, durationS: number | undefined): Record<string, unknown> {
  return durationS !== undefined && part.durationS === undefined ? { ...part, durationS } : part;
}

export function mixWorkload(params: MixParams, seed: number, bind: PartBinder): ClientDriver {
  const p = parseParams(mixParamsSchema, params);
  const drivers = p.parts.map((part, i) => {
    const b = bind(withDuration(part, p.durationS));
    if (!b.success) throw b.error;
    return b.create(deriveSeed(seed, `part:${i}`));
  });
  /** Request id → index of the part that sent it, while the request is open. */
  const owner = new Map<string, number>();

  const claim = (items: readonly ScheduledRequest[], part: number): readonly ScheduledRequest[] => {
    for (const it of items) {
      const prev = owner.get(it.request.id);
      if (prev !== undefined && prev !== part) {
        throw new Error(
          `mix workload: request id '${it.request.id}' is sent by parts ${prev} and ${part} (give each part its own idPrefix)`,
        );
      }
      owner.set(it.request.id, part);
    }
    return items;
  };

  return {
    start(): ScheduledRequest[] {
      owner.clear();
      const out: ScheduledRequest[] = [];
      drivers.forEach((d, i) => out.push(...claim(d.start(), i)));
      // Stable: equal times keep part order.
      return out.sort((a, b) => a.at - b.at);
    },
    onFinish(id: string, now: number, ok: boolean, outputText: string): ScheduledRequest[] {
      const part = owner.get(id);
      if (part === undefined) return [];
      owner.delete(id);
      return [...claim(drivers[part]!.onFinish(id, now, ok, outputText), part)];
    },
  };
}
