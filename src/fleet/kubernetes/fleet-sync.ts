import type { Logger } from 'pino';
import { parseBackendEntry } from '../../config/load.js';
import type { KubernetesDiscoveryConfig } from '../../config/kubernetes-discovery.js';
import type { BackendEntry } from '../../config/schema.js';
import type { Endpoint } from './endpoints.js';

/**
 * What discovery changes on the router: the fleet's add and the admin API's remove (`serve`
 * lends them; the backend is marked as discovered so hot reload leaves it alone).
 */
export interface DiscoveryTarget {
  add(entry: BackendEntry): Promise<void>;
  /** Throws when the backend cannot go (a policy pinned to it): it is tried again next time. */
  remove(name: string): void;
  /**
   * The InferenceObjective priorities found for the pool (objective name → priority), the whole
   * table each time it changes; discovery watches InferenceObjectives only when this is given.
   */
  objectives?(table: ReadonlyMap<string, number>): void;
}

/**
 * Keeps the fleet's discovered backends equal to the pool's ready pods: pods gone or moved to
 * another address are removed (their in-flight requests finish), new ones added from the
 * `backend` template. Updates run one at a time, in order.
 */
export class FleetSync {
  /** Discovered backends in the fleet: name → url. */
  private readonly current = new Map<string, string>();
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly target: DiscoveryTarget,
    private readonly template: KubernetesDiscoveryConfig['backend'],
    private readonly log: Logger,
  ) {}

  /** The discovered backends now in the fleet, by name. */
  names(): string[] {
    return [...this.current.keys()].sort();
  }

  update(eps: readonly Endpoint[]): Promise<void> {
    const run = this.chain.then(() => this.apply(eps));
    this.chain = run.catch(() => undefined); // one failed update must not stop the later ones
    return run;
  }

  private async apply(eps: readonly Endpoint[]): Promise<void> {
    const want = new Map(eps.map((e) => [e.name, e.url]));
    const removed: string[] = [];
    const added: string[] = [];
    for (const [name, url] of this.current) {
      if (want.get(name) === url) continue;
      try {
        this.target.remove(name);
        this.current.delete(name);
        removed.push(name);
      } catch (err) {
        this.log.warn({ backend: name, reason: (err as Error).message }, 'discovered backend kept');
      }
    }
    for (const [name, url] of want) {
      if (this.current.has(name)) continue;
      let entry: BackendEntry;
      try {
        entry = parseBackendEntry({ name, url, ...this.template });
        await this.target.add(entry);
      } catch (err) {
        this.log.warn({ backend: name, url, reason: (err as Error).message }, 'discovered pod not added');
        continue;
      }
      this.current.set(name, url);
      added.push(name);
    }
    if (added.length + removed.length > 0)
      this.log.info({ added, removed, backends: this.current.size }, 'kubernetes discovery: fleet updated');
  }
}
