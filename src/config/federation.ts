/**
 * Config keys for federation (design §2): `region:` for this router and `peers: [{ name, url, region }]`,
 * plus the tuning under `federation:`. Spread `federationConfigKeys` into the config schema and run
 * `checkFederationConfig` after it parses (peer names unique, peers need a region of their own).
 *
 * ```yaml
 * region: us
 * peers: [ { name: eu, url: http://eu-lb:8080, region: eu } ]
 * federation: { probeIntervalMs: 100, tau: 2, peerSelection: trie, ejectMs: 10000 }
 * ```
 */
import { z } from 'zod';

const httpUrl = z.string().refine((u) => {
  try {
    const p = new URL(u);
    return (p.protocol === 'http:' || p.protocol === 'https:') && p.username === '' && p.password === '';
  } catch {
    return false;
  }
}, 'must be an http(s) URL without credentials');

export const peerSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'must be letters, digits, . _ -'),
  url: httpUrl,
  region: z.string().min(1),
});

export const federationConfigKeys = {
  region: z.string().min(1).optional(),
  peers: z.array(peerSchema).optional(),
  federation: z
    .strictObject({
      /** Algorithm 1's probe interval. */
      probeIntervalMs: z.number().int().positive().default(100),
      probeTimeoutMs: z.number().int().positive().default(1000),
      /** τ: a peer whose router queue exceeds this takes nothing. */
      tau: z.number().int().nonnegative().default(2),
      /** trie (prefix-trie policies) or ring (consistent-hash); default follows the local policy. */
      peerSelection: z.enum(['trie', 'ring']).optional(),
      /** A failed peer is skipped this long. */
      ejectMs: z.number().int().positive().default(10_000),
      /** Regional snapshot trie bound (nodes). */
      snapshotMaxEntries: z.number().int().positive().default(100_000),
      /**
       * Peers are told a replica is available only while its KV cache usage is below this: they
       * get spare capacity, this region's users keep their prefix cache. 1 = SP-P alone (SkyLB).
       */
      lendKvBelow: z.number().gt(0).max(1).default(1),
    })
    .optional(),
  /**
   * Several routers in front of one fleet: share in-flight counts and split caps through
   * `state.redis` (src/state/shared-view.ts).
   */
  sharedView: z
    .strictObject({
      intervalMs: z.number().int().min(10).max(10_000).default(100),
      /** A router silent this long is presumed gone. */
      ttlMs: z.number().int().min(100).default(1500),
      /**
       * Allowance kept above a router's in-flight count per capped backend: a new request then
       * needs no round, but an idle router holds that much of the cap away from busy ones.
       */
      headroom: z.number().int().min(0).default(0),
      prefix: z.string().min(1).default('llmlb'),
      /** Default: state.redis. */
      redis: z
        .string()
        .refine((u) => /^rediss?:\/\//.test(u), 'must be a redis:// or rediss:// URL')
        .optional(),
    })
    .optional(),
  /**
   * N routers that behave as one (issue #31): each publishes its pushes and answers (backend,
   * prompt head, token counts, times) and applies the others' to its own policy, so prefix tries,
   * estimated-wait's flights and workload classes learn from all the traffic
   * (src/state/shared-state.ts). Over sharedView's Redis (pub/sub on `<prefix>:shared-state`), or
   * the cluster primary with `serve --workers N`.
   */
  sharedState: z
    .strictObject({
      /** Characters of each prompt published (its head): at least the policy's maxPrefixChars. */
      promptChars: z.number().int().min(0).max(1_048_576).default(32_768),
      /** Counts go out this often (they square a count a lost message left wrong). */
      heartbeatMs: z.number().int().min(10).max(10_000).default(200),
      /** A router silent this long is presumed gone: its requests leave the others' policies. */
      ttlMs: z.number().int().min(100).default(1500),
    })
    .optional(),
};

export interface FederationConfigProblem {
  readonly path: readonly (string | number)[];
  readonly message: string;
}

/** Cross-field checks the schema cannot express. */
export function checkFederationConfig(c: {
  region?: string | undefined;
  peers?: readonly { name: string; region: string }[] | undefined;
  sharedView?: object | undefined;
  sharedState?: object | undefined;
  state?: { redis: string } | undefined;
}): FederationConfigProblem[] {
  const out: FederationConfigProblem[] = [];
  const ownRedis = c.sharedView !== undefined && 'redis' in c.sharedView && c.sharedView.redis !== undefined;
  if (c.sharedView && !c.state && !ownRedis)
    out.push({
      path: ['sharedView'],
      message: 'needs state.redis or sharedView.redis (the routers share their view through it)',
    });
  const peers = c.peers ?? [];
  if (peers.length > 0 && c.region === undefined)
    out.push({ path: ['region'], message: 'peers need this router’s own region' });
  const seen = new Set<string>();
  peers.forEach((p, i) => {
    if (seen.has(p.name)) out.push({ path: ['peers', i, 'name'], message: `peer '${p.name}' listed twice` });
    seen.add(p.name);
    if (p.region === c.region)
      out.push({ path: ['peers', i, 'region'], message: `peer in this router's own region '${p.region}'` });
  });
  return out;
}
