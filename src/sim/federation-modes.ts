/**
 * The policies a multi-router scenario compares: not one router's picker but how the routers work
 * together, each naming the picker its routers run (`policy`, default per mode).
 * - `region-local`: each region's router keeps to its own replicas (SkyLB §5.2's baseline).
 * - `skylb`: prefix trie at both layers + SP-P (the regional snapshot trie picks the peer).
 * - `skylb-ch`: consistent hash at both layers + SP-P (the peer ring picks the peer).
 * - `single`: one router takes every request (the baseline for `routers` scenarios).
 * - `shared-view`: N routers share in-flight counts (src/federation/shared-view-policy.ts).
 * - `independent`: N routers, each seeing only its own pushes.
 * - `shared-state`: N routers that publish every push and every answer (backend, prompt, report) and
 *   apply the others' to their own policy `lagMs` later (default 10): in-flight counts, each policy's
 *   own state (estimated-wait's flights and fits, prefix tries, workload classes) as one router's
 *   (issue #31). `lagMs: 0` is one router's view with the routers' own queues.
 *   `sequenced: true`: pushes go through one ordered log (a compare-and-append on the shared store)
 *   instead: a router reads the log before it picks (its request waits `lagMs`, the round trip) and
 *   so picks on every push made before its own, even at one instant; answers and holds still lag.
 */
import type { PolicySpec } from '../core/policies/index.js';
import type { PeerSelection } from '../federation/types.js';
import { policyLabel } from './simulator.js';

export type SharingMode = 'single' | 'shared-view' | 'independent' | 'shared-state';

export interface FederationMode {
  readonly label: string;
  readonly local: PolicySpec;
  /** For region scenarios: undefined = region-local. */
  readonly forwarding: PeerSelection | undefined;
  /** A replica counts as available to peers only below this KV usage (`lendKvBelow`; 1 = SP-P alone). */
  readonly lendKvBelow: number;
  /** For router scenarios. */
  readonly sharing: SharingMode | undefined;
  /** shared-state: seconds from one router's push or answer to the others applying it. */
  readonly lagS: number;
  /**
   * shared-state: pushes are sequenced (every router picks on every earlier push) and a request is
   * picked lagS after it arrived (the log's round trip); false: pushes lag like answers.
   */
  readonly sequenced: boolean;
}

const DEFAULTS: Readonly<Record<string, string>> = {
  'region-local': 'prefix-trie+sp-p',
  skylb: 'prefix-trie+sp-p',
  'skylb-ch': 'consistent-hash+sp-p',
  single: 'least-connections',
  'shared-view': 'least-connections',
  independent: 'least-connections',
  'shared-state': 'least-connections',
};

export const regionModes = ['region-local', 'skylb', 'skylb-ch'] as const;
export const routerModes = ['single', 'shared-view', 'independent', 'shared-state'] as const;

/** `prefix-trie+sp-p` or `{ name, ...params }` → a policy spec. */
function localSpec(v: unknown, mode: string): PolicySpec {
  if (typeof v === 'string') {
    const plus = v.indexOf('+');
    return plus > 0 ? { name: v.slice(0, plus), params: { push: v.slice(plus + 1) } } : { name: v };
  }
  if (v !== null && typeof v === 'object' && typeof (v as { name?: unknown }).name === 'string') {
    const { name, ...params } = v as { name: string } & Record<string, unknown>;
    return Object.keys(params).length > 0 ? { name, params } : { name };
  }
  throw new Error(`${mode}: policy must be a policy name or { name, …params }`);
}

/** A scenario's policy entry as a federation mode (Error naming the problem). */
export function federationMode(spec: PolicySpec, kind: 'regions' | 'routers'): FederationMode {
  const known: readonly string[] = kind === 'regions' ? regionModes : routerModes;
  if (!known.includes(spec.name))
    throw new Error(`unknown ${kind} policy '${spec.name}' (known: ${known.join(', ')})`);
  const { policy, lendKvBelow, lagMs, sequenced, ...rest } = spec.params ?? {};
  if (Object.keys(rest).length > 0)
    throw new Error(
      `${spec.name}: unknown parameter(s) ${Object.keys(rest).join(', ')} (known: policy, lendKvBelow, lagMs, sequenced)`,
    );
  if (sequenced !== undefined && (typeof sequenced !== 'boolean' || spec.name !== 'shared-state'))
    throw new Error(`${spec.name}: sequenced must be true or false, for shared-state`);
  if (lagMs !== undefined && (typeof lagMs !== 'number' || !(lagMs >= 0) || spec.name !== 'shared-state'))
    throw new Error(`${spec.name}: lagMs must be a number >= 0, for shared-state`);
  if (
    lendKvBelow !== undefined &&
    (typeof lendKvBelow !== 'number' ||
      !(lendKvBelow > 0 && lendKvBelow <= 1) ||
      spec.name === 'region-local')
  )
    throw new Error(`${spec.name}: lendKvBelow must be a number in (0, 1], for skylb or skylb-ch`);
  const local = localSpec(policy ?? DEFAULTS[spec.name], spec.name);
  const labels = [
    ...(policy === undefined ? [] : [policyLabel(local)]),
    ...(lendKvBelow === undefined ? [] : [`lendKvBelow=${lendKvBelow}`]),
    ...(sequenced === true ? ['sequenced'] : []),
    ...(lagMs === undefined ? [] : [`lagMs=${lagMs}`]),
  ];
  return {
    label: labels.length === 0 ? spec.name : `${spec.name}(${labels.join(', ')})`,
    local,
    forwarding: spec.name === 'skylb' ? 'trie' : spec.name === 'skylb-ch' ? 'ring' : undefined,
    lendKvBelow: typeof lendKvBelow === 'number' ? lendKvBelow : 1,
    sharing: kind === 'routers' ? (spec.name as SharingMode) : undefined,
    lagS: typeof lagMs === 'number' ? lagMs / 1000 : 0.01,
    sequenced: sequenced === true,
  };
}
