/**
 * Backends as the gateway names them: `ip:port` endpoints (x-gateway-destination-endpoint), the
 * subset hint it may send, and the fallbacks after a pick.
 */
import type { Scheduler } from '../core/scheduler.js';
import type { Fleet } from '../fleet/fleet.js';

/** `host:port` of a backend URL (the scheme's default port when it names none; IPv6 in brackets). */
export function endpointOf(url: string): string {
  const u = new URL(url);
  const port = u.port !== '' ? u.port : u.protocol === 'https:' ? '443' : '80';
  return `${u.hostname}:${port}`;
}

/** A subset hint's endpoints (comma-separated header, or a metadata list), or undefined for none. */
export function parseSubset(values: readonly string[]): ReadonlySet<string> | undefined {
  const out = new Set<string>();
  for (const v of values)
    for (const part of v.split(',')) {
      const t = part.trim();
      if (t !== '') out.add(t);
    }
  return out.size > 0 ? out : undefined;
}

export class Endpoints {
  /** Backend URL → endpoint, computed once per URL (not per request). */
  private readonly byUrl = new Map<string, string>();

  constructor(private readonly fleet: Fleet) {}

  /** The endpoint of backend `name`; undefined when it is gone. */
  addressOf(name: string): string | undefined {
    const rt = this.fleet.get(name);
    if (!rt) return undefined;
    const url = rt.config.url;
    let a = this.byUrl.get(url);
    if (a === undefined) {
      a = endpointOf(url);
      this.byUrl.set(url, a);
    }
    return a;
  }

  /** Backends whose endpoint is outside the subset (they are excluded from the pick). */
  outside(subset: ReadonlySet<string>): string[] {
    const out: string[] = [];
    for (const rt of this.fleet.all()) {
      const a = this.addressOf(rt.config.name);
      if (a === undefined || !subset.has(a)) out.push(rt.config.name);
    }
    return out;
  }

  /** The backend serving at `endpoint`, if one of ours does. */
  nameAt(endpoint: string): string | undefined {
    for (const rt of this.fleet.all()) if (this.addressOf(rt.config.name) === endpoint) return rt.config.name;
    return undefined;
  }

  /**
   * Up to `n` endpoints to try after `picked` if it fails: healthy, not draining, serving `model`,
   * not excluded; the least loaded (in-flight over capacity) first, registration order on ties.
   */
  fallbacks(
    scheduler: Scheduler,
    model: string,
    picked: string,
    exclude: ReadonlySet<string>,
    n: number,
  ): string[] {
    if (n === 0) return [];
    const views = scheduler
      .backendViews()
      .filter(
        (b) => b.name !== picked && b.healthy && !b.draining && b.models.has(model) && !exclude.has(b.name),
      );
    const load = (b: (typeof views)[number]): number =>
      b.maxConcurrency === Infinity ? b.inFlight / 1e6 : b.inFlight / Math.max(1, b.maxConcurrency);
    views.sort((a, b) => load(a) - load(b) || a.index - b.index);
    const out: string[] = [];
    for (const b of views) {
      if (out.length === n) break;
      const a = this.addressOf(b.name);
      if (a !== undefined) out.push(a);
    }
    return out;
  }
}
