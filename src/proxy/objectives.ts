/** A configuration's `objectives:` table (objective name → { priority }). */
export type ConfiguredObjectives = Readonly<Record<string, { readonly priority: number }>> | undefined;

/**
 * The router queue's InferenceObjective priorities: the configuration's `objectives:` merged
 * with the InferenceObjectives discovered in Kubernetes (`discovery.kubernetes`). Where both
 * name an objective, the discovered one wins: the cluster object is what the platform edits live
 * (`kubectl apply`), and the static table stays the fallback for objectives with no object, and
 * the whole table until the first list comes back. The merged Map is rebuilt only when either
 * side changes (a discovery update, a reload handing a new `objectives` table); a request costs
 * one Map lookup.
 */
export class ObjectiveTable {
  private discovered: ReadonlyMap<string, number> | undefined;
  private builtFrom: ConfiguredObjectives;
  private stale = true;
  private merged = new Map<string, number>();

  /** The discovered objectives (the whole table); undefined drops them. */
  setDiscovered(table: ReadonlyMap<string, number> | undefined): void {
    this.discovered = table;
    this.stale = true;
  }

  /**
   * The priority of a request naming objective `v` (its header's value), given the current
   * configuration's `objectives`: undefined (priority 0) when it names none or one not known.
   */
  priority(configured: ConfiguredObjectives, v: string | string[] | undefined): number | undefined {
    if (typeof v !== 'string') return undefined;
    if (this.stale || configured !== this.builtFrom) this.rebuild(configured);
    return this.merged.get(v.trim());
  }

  /** The merged table (a copy), for logs and tests. */
  entries(configured: ConfiguredObjectives): Map<string, number> {
    if (this.stale || configured !== this.builtFrom) this.rebuild(configured);
    return new Map(this.merged);
  }

  private rebuild(configured: ConfiguredObjectives): void {
    const m = new Map<string, number>();
    if (configured) for (const [name, o] of Object.entries(configured)) m.set(name, o.priority);
    if (this.discovered) for (const [name, p] of this.discovered) m.set(name, p);
    this.merged = m;
    this.builtFrom = configured;
    this.stale = false;
  }
}
