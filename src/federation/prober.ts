import type { Federation } from './federation.js';
import { parsePeerStatus } from './status-handler.js';
import { PEER_STATUS_PATH, type PeerStatus } from './types.js';

export interface PeerProberOptions {
  /** Algorithm 1's ProbeInterval (ms). */
  readonly intervalMs: number;
  /** A probe slower than this counts as failed (ms). */
  readonly timeoutMs?: number;
  readonly now?: () => number;
  /** A peer answered (its status is in the Federation): the host may forward queued requests. */
  readonly onStatus?: () => void;
}

/**
 * Probes every peer's status endpoint at an interval (Algorithm 1, lines 9–16) and hands the
 * answers to the Federation; a probe that fails or answers nonsense ejects the peer for a while.
 */
export class PeerProber {
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private readonly now: () => number;

  constructor(
    private readonly federation: Federation,
    private readonly opts: PeerProberOptions,
  ) {
    this.now = opts.now ?? Date.now;
  }

  start(): void {
    if (this.timer) return;
    // probe() turns every peer failure into a peer state; what still escapes is a bug: say so.
    const round = (): void => {
      this.probeOnce().catch((err: unknown) =>
        process.stderr.write(`llmlb: peer probe round failed: ${String(err)}\n`),
      );
    };
    round();
    this.timer = setInterval(round, this.opts.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One round over all peers (skipped while the previous one is still out). */
  async probeOnce(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      await Promise.all(this.federation.peerSpecs().map((p) => this.probe(p.name, p.url)));
    } finally {
      this.running = false;
    }
  }

  private async probe(name: string, url: string): Promise<void> {
    let status: PeerStatus | undefined;
    try {
      const res = await fetch(new URL(PEER_STATUS_PATH, url), {
        signal: AbortSignal.timeout(this.opts.timeoutMs ?? 1000),
      });
      status = res.ok ? parsePeerStatus(await res.json()) : undefined;
    } catch {
      // Down or slow: unavailable until it answers again (a peer starting later is picked up).
    }
    if (!status) return this.federation.markFailed(name, this.now(), false);
    this.federation.setStatus(name, status, this.now());
    this.opts.onStatus?.();
  }
}
