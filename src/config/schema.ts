import { z } from 'zod';

/**
 * The router's configuration file (design §2), validated once at load. Every object is strict:
 * an unknown key is an error, so a typo never silently falls back to a default.
 */

const positiveInt = z.number().int().positive();

function isHttpUrl(u: string): boolean {
  try {
    const p = new URL(u);
    return (p.protocol === 'http:' || p.protocol === 'https:') && p.hostname !== '';
  } catch {
    return false;
  }
}

export const backendSchema = z.strictObject({
  name: z
    .string()
    .min(1)
    .regex(/^[A-Za-z0-9._:-]+$/, 'use letters, digits and . _ : - only'),
  url: z.string().refine(isHttpUrl, 'must be an http:// or https:// URL'),
  api: z.enum(['ollama', 'openai']).default('ollama'),
  models: z.array(z.string().min(1)).min(1).optional(),
  maxConcurrency: positiveInt.optional(),
  weight: z.number().positive().default(1),
  region: z.string().min(1).optional(),
});

const policySchema = z.union([z.string().min(1), z.looseObject({ name: z.string().min(1) })]);

export const configSchema = z.strictObject({
  server: z
    .strictObject({
      host: z.string().min(1).default('127.0.0.1'),
      port: z.number().int().min(0).max(65535).default(8080),
      maxBodyBytes: positiveInt.default(10 * 1024 * 1024),
    })
    .prefault({}),
  backends: z.array(backendSchema).min(1, 'at least one backend is required'),
  policy: policySchema.default('estimated-wait'),
  retry: z
    .strictObject({
      attempts: z.number().int().min(1).max(20).default(4),
      backoffMs: z.number().min(0).max(60_000).default(25),
    })
    .prefault({}),
  timeouts: z
    .strictObject({
      connectMs: positiveInt.default(5_000),
      // Queues in front of a busy GPU are long: the first byte may take minutes.
      firstByteMs: positiveInt.default(600_000),
      idleMs: positiveInt.default(120_000),
    })
    .prefault({}),
  health: z
    .strictObject({
      failuresToEject: positiveInt.default(3),
      probeIntervalMs: positiveInt.default(5_000),
      probeTimeoutMs: positiveInt.default(2_000),
    })
    .prefault({}),
  discovery: z.strictObject({ refreshMs: positiveInt.default(30_000) }).prefault({}),
  queue: z
    .strictObject({
      maxLength: positiveInt.default(10_000),
      maxWaitMs: positiveInt.default(600_000),
    })
    .prefault({}),
  admin: z.strictObject({ token: z.string().min(1).optional() }).optional(),
  log: z
    .strictObject({
      level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
      prompts: z.boolean().default(false),
    })
    .prefault({}),
});

export type ConfigInput = z.input<typeof configSchema>;

/** One backend, normalized: `maxConcurrency` Infinity when uncapped, `models` undefined when discovered. */
export interface BackendEntry {
  readonly name: string;
  readonly url: string;
  readonly api: 'ollama' | 'openai';
  readonly models?: readonly string[] | undefined;
  readonly maxConcurrency: number;
  readonly weight: number;
  readonly region?: string | undefined;
}

/** The validated configuration with every default applied. */
export interface RouterConfig {
  readonly server: { readonly host: string; readonly port: number; readonly maxBodyBytes: number };
  readonly backends: readonly BackendEntry[];
  readonly policy: { readonly name: string; readonly params: Readonly<Record<string, unknown>> };
  readonly retry: { readonly attempts: number; readonly backoffMs: number };
  readonly timeouts: { readonly connectMs: number; readonly firstByteMs: number; readonly idleMs: number };
  readonly health: {
    readonly failuresToEject: number;
    readonly probeIntervalMs: number;
    readonly probeTimeoutMs: number;
  };
  readonly discovery: { readonly refreshMs: number };
  readonly queue: { readonly maxLength: number; readonly maxWaitMs: number };
  readonly admin?: { readonly token?: string | undefined } | undefined;
  readonly log: { readonly level: string; readonly prompts: boolean };
}

export function normalizeBackend(b: z.output<typeof backendSchema>): BackendEntry {
  return {
    name: b.name,
    url: b.url.replace(/\/+$/, ''),
    api: b.api,
    models: b.models,
    maxConcurrency: b.maxConcurrency ?? Infinity,
    weight: b.weight,
    region: b.region,
  };
}

export function normalize(c: z.output<typeof configSchema>): RouterConfig {
  const policy =
    typeof c.policy === 'string'
      ? { name: c.policy, params: {} }
      : (() => {
          const { name, ...params } = c.policy;
          return { name, params };
        })();
  return {
    server: c.server,
    backends: c.backends.map(normalizeBackend),
    policy,
    retry: c.retry,
    timeouts: c.timeouts,
    health: c.health,
    discovery: c.discovery,
    queue: c.queue,
    admin: c.admin,
    log: c.log,
  };
}
