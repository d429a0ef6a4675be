/**
 * Engine profile files: what `llmlb profile` writes and `llmlb whatif --profile` reads — the
 * EngineProfile fields (src/engine/types.ts) measured or chosen, over defaultProfile(). YAML or
 * JSON, either the fields themselves or under a `profile:` key (with the measurement's notes beside
 * it).
 *
 * `EngineProfilePatch` is the one engine-profile schema: a scenario's `profile:` sections
 * (scenario/load.ts) and a profile file are both parsed with it.
 */
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { z } from 'zod';
import { defaultProfile } from '../engine/profile.js';
import type { EngineProfile } from '../engine/types.js';

/** `{ prefix: a-, count: 3 }` → a-0 … a-2 (zero-padded to the widest index). */
export function adapterNames(prefix: string, count: number): string[] {
  const width = String(Math.max(0, count - 1)).length;
  return Array.from({ length: count }, (_, i) => `${prefix}${String(i).padStart(width, '0')}`);
}

/** An engine's LoRA section (EngineProfile.lora); `adapters` as names or as `{ prefix, count }`. */
export const loraSchema = z.strictObject({
  maxLora: z.number().int().positive(),
  swapS: z.number().finite().nonnegative(),
  adapters: z
    .union([
      z.array(z.string().min(1)),
      z
        .strictObject({ prefix: z.string().min(1), count: z.number().int().positive() })
        .transform((a) => adapterNames(a.prefix, a.count)),
    ])
    .optional(),
});

export const EngineProfilePatch = z
  .strictObject({
    slots: z.number().int().positive(),
    kvCapacityTokens: z.number().int().positive(),
    speed: z.number().finite().positive(),
    baseStepS: z.number().finite().nonnegative(),
    perSeqS: z.number().finite().nonnegative(),
    perTokenS: z.number().finite().nonnegative(),
    prefillPerTokenS: z.number().finite().nonnegative(),
    blockSize: z.number().int().positive(),
    prefixCacheBlocks: z.number().int().nonnegative(),
    cacheMode: z.enum(['blocks', 'slots']),
    pagedKv: z.boolean(),
    prefillMode: z.enum(['mixed', 'stall', 'chunked']),
    maxBatchedTokens: z.number().int().positive(),
    lora: loraSchema,
  } satisfies Record<keyof EngineProfile, z.ZodType>)
  .partial();

/** Read a profile file; throws an Error naming the file and the field. */
export function loadProfileFile(path: string): EngineProfile {
  let raw: unknown;
  try {
    raw = parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new Error(`${path}: ${(e as Error).message}`);
  }
  const nested = typeof raw === 'object' && raw !== null && Object.hasOwn(raw, 'profile');
  const body: unknown = nested ? (raw as { profile: unknown }).profile : (raw ?? {});
  const r = EngineProfilePatch.safeParse(body);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    const path_ = [
      ...(nested ? ['profile'] : []),
      ...issue.path,
      ...(issue.code === 'unrecognized_keys' ? issue.keys : []),
    ];
    throw new Error(`${path}: ${path_.join('.') || '(top)'}: ${issue.message}`);
  }
  return defaultProfile(r.data as Partial<EngineProfile>);
}
