import type { UpstreamExchange } from './upstream-exchange.js';

/** The exchanges under way per backend: what to give up when a backend is ejected or stuck. */
export class AttemptBook {
  private readonly byBackend = new Map<string, Set<UpstreamExchange>>();

  add(backend: string, ex: UpstreamExchange): void {
    let s = this.byBackend.get(backend);
    if (!s) this.byBackend.set(backend, (s = new Set()));
    s.add(ex);
  }

  delete(backend: string, ex: UpstreamExchange): void {
    this.byBackend.get(backend)?.delete(ex);
  }

  /** Gives up every attempt on `backend` that has not had its first byte (they retry elsewhere). */
  abandonWaiting(backend: string, reason: string): number {
    let n = 0;
    for (const ex of this.byBackend.get(backend) ?? [])
      if (ex.firstByteAt === undefined) {
        ex.abandon(reason);
        n++;
      }
    return n;
  }
}
