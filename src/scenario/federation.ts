/**
 * Scenario keys for more than one router (issue #19):
 *
 * ```yaml
 * regions:                      # a router per region; backends say their `region`
 *   clients: [ { name: us, clients: 120 }, { name: eu, clients: 40 }, { name: asia, clients: 40 } ]
 *   oneWayMs: 100               # one-way latency between two regions (default 100)
 *   links: [ { between: [us, eu], oneWayMs: 40 } ]   # per pair
 *   peerProbeMs: 100            # how often a router probes its peers (Algorithm 1, line 16)
 *   tau: 2                      # τ: a peer whose router queue exceeds this is not available
 * routers:                      # or: N routers in front of the same fleet (HA replicas)
 *   count: 3
 *   syncMs: 100                 # how often in-flight counts are shared (the Redis round)
 * ```
 * Each region runs the scenario's workload with its own `clients` (and its region name as the id
 * prefix, so ids and users never collide across regions). With `routers`, requests reach the
 * routers in turn, as a TCP balancer or DNS round robin would spread them.
 */
import { z } from 'zod';
import type { ClientDriver } from '../workloads/types.js';

const regionName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._]*$/, 'must be letters, digits, . _');

export const regionsSection = z.strictObject({
  clients: z
    .array(z.strictObject({ name: regionName, clients: z.number().int().positive() }))
    .min(2, 'at least two regions'),
  oneWayMs: z.number().finite().nonnegative().default(100),
  links: z
    .array(
      z.strictObject({
        between: z.tuple([regionName, regionName]),
        oneWayMs: z.number().finite().nonnegative(),
      }),
    )
    .default([]),
  peerProbeMs: z.number().finite().positive().default(100),
  tau: z.number().int().nonnegative().default(2),
});

export const routersSection = z.strictObject({
  count: z.number().int().min(1).max(64),
  syncMs: z.number().finite().positive().default(100),
});

export type RegionsSection = z.infer<typeof regionsSection>;
export type RoutersSection = z.infer<typeof routersSection>;

/** One region: its router, its clients (a driver of their own), its backends (by `region`). */
export interface ScenarioRegion {
  readonly name: string;
  readonly clients: number;
  createDriver(seed: number): ClientDriver;
}

export interface ScenarioRegions {
  readonly list: readonly ScenarioRegion[];
  /** One-way latency between two regions, seconds (0 within one). */
  oneWayS(a: string, b: string): number;
  readonly peerProbeS: number;
  readonly tau: number;
}

export interface ScenarioRouters {
  readonly count: number;
  readonly syncS: number;
}

/** A problem with the two sections, at a path relative to the file's root. */
export interface FederationProblem {
  readonly path: readonly (string | number)[];
  readonly message: string;
}

/**
 * Check the sections against the fleet and bind one driver per region. `bindRegion` binds the
 * scenario's workload with `clients` and `idPrefix` replaced (a message when it cannot).
 */
export function buildRegions(
  section: RegionsSection,
  fleetRegions: readonly (string | undefined)[],
  bindRegion: (clients: number, idPrefix: string) => ((seed: number) => ClientDriver) | string,
): { regions?: ScenarioRegions; problems: FederationProblem[] } {
  const problems: FederationProblem[] = [];
  const names = section.clients.map((r) => r.name);
  section.clients.forEach((r, i) => {
    if (names.indexOf(r.name) !== i)
      problems.push({ path: ['regions', 'clients', i, 'name'], message: `region '${r.name}' listed twice` });
    if (!fleetRegions.includes(r.name))
      problems.push({ path: ['regions', 'clients', i, 'name'], message: `no backend in region '${r.name}'` });
  });
  fleetRegions.forEach((r, i) => {
    if (r === undefined || !names.includes(r))
      problems.push({
        path: ['fleet'],
        message: `backend ${i} has region '${r ?? '(none)'}', not one of regions.clients (${names.join(', ')})`,
      });
  });
  const links = new Map<string, number>();
  section.links.forEach((l, i) => {
    for (const n of l.between)
      if (!names.includes(n))
        problems.push({ path: ['regions', 'links', i, 'between'], message: `unknown region '${n}'` });
    links.set(`${l.between[0]}\u0000${l.between[1]}`, l.oneWayMs / 1000);
    links.set(`${l.between[1]}\u0000${l.between[0]}`, l.oneWayMs / 1000);
  });
  const list: ScenarioRegion[] = [];
  section.clients.forEach((r, i) => {
    const bound = bindRegion(r.clients, `${r.name}-`);
    if (typeof bound === 'string')
      problems.push({ path: ['regions', 'clients', i, 'clients'], message: bound });
    else list.push({ name: r.name, clients: r.clients, createDriver: bound });
  });
  if (problems.length > 0) return { problems };
  const def = section.oneWayMs / 1000;
  return {
    problems,
    regions: {
      list,
      oneWayS: (a, b) => (a === b ? 0 : (links.get(`${a}\u0000${b}`) ?? def)),
      peerProbeS: section.peerProbeMs / 1000,
      tau: section.tau,
    },
  };
}
