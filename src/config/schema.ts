import { z } from 'zod';
import {
  endpointPickerConfigSchema,
  type EndpointPickerConfig,
} from '../core/policies/framework/endpoint-picker-config.js';
import { traceConfigSchema, type TraceSettings } from './trace.js';
import { policySpecSchema, type PolicySpec } from './policy-spec.js';
import { federationConfigKeys } from './federation.js';
import { kubernetesDiscoverySchema, type KubernetesDiscoveryConfig } from './kubernetes-discovery.js';
import type { PeerSpec } from '../core/federation-types.js';

export type { PolicySpec } from './policy-spec.js';

/**
 * The router's configuration file (design §2), validated once at load. Every object is strict:
 * an unknown key is an error, so a typo never silently falls back to a default.
 */

/** The policy used when the file names none: routing by predicted wait suits unequal fleets best. */
export const DEFAULT_POLICY = 'estimated-wait';

export const API_KINDS = ['ollama', 'openai'] as const;
export type ApiKind = (typeof API_KINDS)[number];

/** pino's built-in levels. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const positiveInt = z.number().int().positive();

function isHttpUrl(u: string): boolean {
  try {
    const p = new URL(u);
    // A query or fragment would be glued in front of every proxied path, credentials never sent:
    // reject them here (src/fleet/backend-url.ts splits what passes into origin and path prefix).
    return (
      (p.protocol === 'http:' || p.protocol === 'https:') &&
      p.hostname !== '' &&
      p.username === '' &&
      p.password === '' &&
      p.search === '' &&
      p.hash === ''
    );
  } catch {
    return false;
  }
}

export const backendSchema = z.strictObject({
  // The name goes out in the `x-llmlb-backend` header and in metric labels: keep it token-safe.
  name: z
    .string()
    .min(1)
    .regex(/^[A-Za-z0-9._:-]+$/, 'use letters, digits and . _ : - only'),
  url: z
    .string()
    .refine(isHttpUrl, 'must be an http:// or https:// URL without credentials, query or fragment'),
  api: z.enum(API_KINDS).default('ollama'),
  // An empty list would make the backend unroutable; absence is how discovery is asked for.
  models: z
    .array(z.string().min(1))
    .min(1, 'list at least one model, or leave `models` out to discover them')
    .optional(),
  maxConcurrency: positiveInt.optional(),
  weight: z.number().positive().default(1),
  region: z.string().min(1).optional(),
  // false: the backend rejects `stream_options` (the router then counts a stream's events instead).
  streamUsage: z.boolean().default(true),
});

function isRedisUrl(u: string): boolean {
  try {
    const p = new URL(u);
    return (p.protocol === 'redis:' || p.protocol === 'rediss:') && p.hostname !== '';
  } catch {
    return false;
  }
}

/** Per-model traffic targets (quotas). */
export const quotaLimitsSchema = z.strictObject({
  weight: z.number().positive().default(1),
  // 0 pauses the model: requests wait.
  maxConcurrent: z.number().int().min(0),
  tokensPerMinute: positiveInt,
  requestsPerMinute: positiveInt,
});

export const configSchema = z.strictObject({
  server: z
    .strictObject({
      host: z.string().min(1).default('127.0.0.1'),
      // 0 asks the OS for a free port (tests, demo).
      port: z.number().int().min(0).max(65535).default(8080),
      maxBodyBytes: positiveInt.default(10 * 1024 * 1024),
      // Deeper JSON is refused (400) before anything recursive reads it.
      maxJsonDepth: z.number().int().min(2).max(10_000).default(128),
      // Request header naming the task ("summarize", "translation", …): a hint for the
      // output-length predictor of the workload-tracking policies (workload-aware, jsq, …).
      taskHintHeader: z
        .string()
        .regex(/^[A-Za-z0-9-]+$/, 'a header name')
        .default('x-llmlb-task')
        .transform((h) => h.toLowerCase()),
    })
    .prefault({}),
  // At least one, unless discovery.kubernetes finds them (load.ts checks).
  backends: z.array(backendSchema).default([]),
  policy: policySpecSchema.default({ name: DEFAULT_POLICY, params: {} }),
  // Scheduling profiles (filters → weighted scorers → picker) in llm-d's EndpointPickerConfig shape.
  scheduling: endpointPickerConfigSchema.optional(),
  retry: z
    .strictObject({
      // Total tries per request, the first included.
      attempts: z.number().int().min(1).max(20).default(4),
      // Base of a jittered backoff between tries.
      backoffMs: z.number().min(0).max(60_000).default(25),
    })
    .prefault({}),
  timeouts: z
    .strictObject({
      connectMs: positiveInt.default(5_000),
      // Queues in front of a busy GPU are long: the first byte may take minutes.
      firstByteMs: positiveInt.default(600_000),
      // Longest silence between two chunks of a stream.
      idleMs: positiveInt.default(120_000),
      // Receiving a request's headers and body (slow senders get 408 and their socket closed).
      bodyMs: positiveInt.default(30_000),
    })
    .prefault({}),
  health: z
    .strictObject({
      failuresToEject: positiveInt.default(3),
      probeIntervalMs: positiveInt.default(5_000),
      probeTimeoutMs: positiveInt.default(2_000),
      // Engine load (vLLM/SGLang /metrics): scorers treat it as stale after a few missed scrapes.
      scrapeIntervalMs: positiveInt.default(1_000),
      // A backend whose requests get no first byte for max(stallMinMs, stallFactor × its usual
      // first-byte time), while nothing else on it progresses, is stuck: ejected, requests retried.
      // A non-streamed request (first byte = whole answer) also gets 3× its expected duration.
      stallMinMs: positiveInt.default(10_000),
      stallFactor: z.number().min(1).default(10),
      // A stuck backend stays out this long even if its probe answers (hung generation, live probe).
      quarantineMs: positiveInt.default(30_000),
    })
    .prefault({}),
  discovery: z
    .strictObject({
      refreshMs: positiveInt.default(30_000),
      // An InferencePool's ready pods as backends, beside the static ones (src/fleet/kubernetes/).
      kubernetes: kubernetesDiscoverySchema.optional(),
    })
    .prefault({}),
  queue: z
    .strictObject({
      maxLength: positiveInt.default(10_000),
      maxWaitMs: positiveInt.default(600_000),
    })
    .prefault({}),
  // Affinity key for consistent-hash / session-affinity: this header, else this JSON body field
  // (dotted path, e.g. metadata.session_id). Defaults: x-session-token, then OpenAI's `user`.
  sessionKey: z
    .strictObject({
      header: z
        .string()
        .regex(/^[A-Za-z0-9-]+$/, 'a header name')
        .default('x-session-token'),
      bodyField: z
        .string()
        .regex(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/, 'a field name or dotted path')
        .default('user'),
    })
    .optional(),
  // Closed by default: without a token and without `listen`, every /admin route answers 403.
  admin: z
    .strictObject({
      token: z.string().min(1).optional(),
      // A second listener that alone serves /admin (and the dashboard): `127.0.0.1:9090`, `[::1]:9090`,
      // or a bare port (loopback).
      listen: z
        .union([z.string(), z.number()])
        .refine((v) => parseListenAddress(v) !== undefined, 'must be host:port, [ipv6]:port or a port')
        .optional(),
    })
    .optional(),
  // Shared state for quotas and leases; absent = in-memory (one router).
  state: z
    .strictObject({
      redis: z.string().refine(isRedisUrl, 'must be a redis:// or rediss:// URL'),
      keyPrefix: z.string().min(1).default('llmlb:{quota}:'),
      // While Redis can't be reached, proxied requests for models with a quota pass ungated
      // (counted, logged once per outage) instead of 503; /schedule answers 503 either way.
      failOpen: z.boolean().default(false),
      // A Redis command unanswered this long fails; the store then answers 503 at once until
      // Redis answers again.
      commandTimeoutMs: z.number().int().min(10).max(60_000).default(500),
    })
    .optional(),
  quotas: z.strictObject({ models: z.record(z.string().min(1), quotaLimitsSchema).default({}) }).optional(),
  // InferenceObjectives by name (the Gateway API Inference Extension's: a request names one in
  // the x-gateway-inference-objective header): their priority orders the router queue, higher
  // first; a request naming none, or an unknown one, has priority 0.
  objectives: z.record(z.string().min(1), z.strictObject({ priority: z.number().int() })).optional(),
  admission: z
    .strictObject({
      leaseTtlMs: positiveInt.default(30_000),
      // How often the reclaimer looks for expired leases.
      reclaimIntervalMs: positiveInt.default(1_000),
      // Rolling-window tick: capacity returns, and wait hints align, on these boundaries.
      tickMs: z.number().int().min(10).max(10_000).default(100),
    })
    .prefault({}),
  log: z
    .strictObject({
      level: z.enum(LOG_LEVELS).default('info'),
      // Prompts can hold personal data: logging them is opt-in.
      prompts: z.boolean().default(false),
    })
    .prefault({}),
  // Capture a trace of what was routed, for `llmlb whatif` (src/trace/config.ts).
  trace: traceConfigSchema.optional(),
  // `llmlb epp`: the Gateway API endpoint picker (Envoy ext_proc v3 over gRPC, src/epp/).
  epp: z
    .strictObject({
      // Default: server.host. In a pod, 0.0.0.0 (the gateway connects from elsewhere).
      host: z.string().min(1).optional(),
      port: z.number().int().min(0).max(65535).default(9002),
      // grpc.health.v1 (liveness and readiness probes); it also answers on `port`.
      healthPort: z.number().int().min(0).max(65535).default(9003),
      // Fallback endpoints named after the pick in x-gateway-destination-endpoint.
      fallbacks: z.number().int().min(0).max(16).default(2),
    })
    .optional(),
  // A router per region and its peers (issue #19, src/federation/config.ts).
  ...federationConfigKeys,
});

export type ConfigInput = z.input<typeof configSchema>;

/** One backend, normalized: `maxConcurrency` Infinity when uncapped, `models` undefined when discovered. */
export interface BackendEntry {
  readonly name: string;
  /** Without trailing slashes, so paths can be appended as they are. */
  readonly url: string;
  readonly api: ApiKind;
  readonly models?: readonly string[] | undefined;
  readonly maxConcurrency: number;
  readonly weight: number;
  readonly region?: string | undefined;
  /** Ask it for a stream's usage when the client did not (default true; stream-usage.ts). */
  readonly streamUsage?: boolean | undefined;
}

/** The validated configuration with every default applied. */
export interface RouterConfig {
  readonly server: {
    readonly host: string;
    readonly port: number;
    readonly maxBodyBytes: number;
    /** Optional in settings built in code; the config file always sets it. */
    readonly maxJsonDepth?: number;
    /** Lower-case header name of the task hint; default x-llmlb-task (optional in code, as above). */
    readonly taskHintHeader?: string;
  };
  readonly backends: readonly BackendEntry[];
  readonly policy: PolicySpec;
  readonly scheduling?: EndpointPickerConfig | undefined;
  readonly retry: { readonly attempts: number; readonly backoffMs: number };
  readonly timeouts: {
    readonly connectMs: number;
    readonly firstByteMs: number;
    readonly idleMs: number;
    readonly bodyMs?: number;
  };
  readonly health: {
    readonly failuresToEject: number;
    readonly probeIntervalMs: number;
    readonly probeTimeoutMs: number;
    readonly scrapeIntervalMs: number;
    readonly stallMinMs?: number;
    readonly stallFactor?: number;
    readonly quarantineMs?: number;
  };
  readonly discovery: {
    readonly refreshMs: number;
    readonly kubernetes?: KubernetesDiscoveryConfig | undefined;
  };
  readonly queue: { readonly maxLength: number; readonly maxWaitMs: number };
  readonly admin?: AdminSettings | undefined;
  /** Where the session key comes from (absent: `x-session-token`, then the body's `user`). */
  readonly sessionKey?: { readonly header: string; readonly bodyPath: readonly string[] } | undefined;
  readonly log: { readonly level: LogLevel; readonly prompts: boolean };
  // Optional so configurations built in code (benches, tests) need not spell them out.
  readonly state?:
    | {
        readonly redis: string;
        readonly keyPrefix: string;
        /** Default false; optional so configurations built in code need not spell it out. */
        readonly failOpen?: boolean;
        /** Default 500. */
        readonly commandTimeoutMs?: number;
      }
    | undefined;
  readonly quotas?: { readonly models: Readonly<Record<string, QuotaLimitsEntry>> } | undefined;
  /** InferenceObjective priorities by objective name (x-gateway-inference-objective). */
  readonly objectives?: Readonly<Record<string, { readonly priority: number }>> | undefined;
  readonly admission?:
    { readonly leaseTtlMs: number; readonly reclaimIntervalMs: number; readonly tickMs: number } | undefined;
  /** Trace capture (absent = off). */
  readonly trace?: TraceSettings | undefined;
  /** This router's region and its peer routers (issue #19); absent = no federation. */
  readonly region?: string | undefined;
  readonly peers?: readonly PeerSpec[] | undefined;
  readonly federation?: FederationSettings | undefined;
  /**
   * Pushes and answers shared with the other routers (over sharedView's Redis, or the cluster
   * primary with `serve --workers N`) and applied to this router's policy (issue #31).
   */
  readonly sharedState?:
    | {
        readonly promptChars: number;
        readonly heartbeatMs: number;
        readonly ttlMs: number;
      }
    | undefined;
  /** `llmlb epp`'s gRPC listeners (absent: the defaults, 9002 and 9003). */
  readonly epp?: EppSettings | undefined;
  /** N routers on one fleet sharing in-flight counts through state.redis (issue #19). */
  readonly sharedView?:
    | {
        readonly intervalMs: number;
        readonly ttlMs: number;
        readonly headroom: number;
        readonly prefix: string;
        /** Default: state.redis. */
        readonly redis?: string | undefined;
      }
    | undefined;
}

export interface EppSettings {
  readonly host?: string | undefined;
  readonly port: number;
  readonly healthPort: number;
  readonly fallbacks: number;
}

export interface FederationSettings {
  readonly probeIntervalMs: number;
  readonly probeTimeoutMs: number;
  readonly tau: number;
  readonly peerSelection?: 'trie' | 'ring' | undefined;
  readonly ejectMs: number;
  readonly snapshotMaxEntries: number;
  /** Replicas count as available to peers only below this KV usage (1 = SP-P alone). */
  readonly lendKvBelow?: number | undefined;
}

/** Who may use /admin: nobody unless a token or a separate listener is configured (security.md). */
export interface AdminSettings {
  readonly token?: string | undefined;
  /** Serve /admin only on this second address, never on the client port. */
  readonly listen?: ListenAddress | undefined;
}

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

/** `host:port`, `[v6]:port`, `:port` or a bare port (loopback); undefined when malformed. */
export function parseListenAddress(v: string | number): ListenAddress | undefined {
  const text = String(v).trim();
  const m = /^(?:(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]*)):)?(\d{1,5})$/.exec(text);
  if (!m) return undefined;
  const port = Number(m[3]);
  if (port > 65535) return undefined;
  return { host: m[1] ?? (m[2] ? m[2] : '127.0.0.1'), port };
}

export interface QuotaLimitsEntry {
  readonly weight: number;
  readonly maxConcurrent: number;
  readonly tokensPerMinute: number;
  readonly requestsPerMinute: number;
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
    streamUsage: b.streamUsage,
  };
}

export function normalize(c: z.output<typeof configSchema>): RouterConfig {
  return {
    server: c.server,
    backends: c.backends.map(normalizeBackend),
    policy: c.policy,
    scheduling: c.scheduling,
    retry: c.retry,
    timeouts: c.timeouts,
    health: c.health,
    discovery: c.discovery,
    queue: c.queue,
    admin: c.admin && {
      token: c.admin.token,
      listen: c.admin.listen === undefined ? undefined : parseListenAddress(c.admin.listen),
    },
    sessionKey: c.sessionKey && {
      header: c.sessionKey.header.toLowerCase(),
      bodyPath: c.sessionKey.bodyField.split('.'),
    },
    log: c.log,
    state: c.state,
    quotas: c.quotas,
    objectives: c.objectives,
    admission: c.admission,
    trace: c.trace,
    region: c.region,
    peers: c.peers,
    federation: c.federation,
    sharedView: c.sharedView,
    sharedState: c.sharedState,
    epp: c.epp,
  };
}
