/**
 * The forwarding decision of a federated router (SkyLB Algorithm 1, HANDLEREQUEST): run locally
 * while any local replica is available; otherwise forward to an available peer router, chosen by the
 * regional snapshot trie (prefix-trie policies) or the peer ring (consistent-hash policies); with
 * no peer available either, queue locally. Pure: the host passes the time, probes peers, and reports
 * what it forwarded and how that ended. Shared by the live router and the simulator.
 */
import { HashRing } from '../core/prefix/hash-ring.js';
import { PrefixTrie } from '../core/prefix/prefix-trie.js';
import type { RequestInfo } from '../core/types.js';
import type { PeerSelection, PeerSpec, PeerStatus, RouteDecision } from './types.js';

export interface FederationOptions {
  readonly region: string;
  readonly peers: readonly PeerSpec[];
  readonly selection: PeerSelection;
  /** τ: a peer whose router queue (plus what we sent it since its status) exceeds this is full. */
  readonly tau?: number;
  /** A status older than this (ms) says nothing: the peer counts as unavailable. */
  readonly statusTtlMs?: number;
  /** A peer that failed (probe or forward) is skipped this long (ms). */
  readonly ejectMs?: number;
  /** Regional snapshot trie bounds (as the local trie's: chunk, entries, indexed prefix). */
  readonly chunkChars?: number;
  readonly maxEntries?: number;
  readonly maxPrefixChars?: number;
  /** Virtual nodes per peer on the ring. */
  readonly vnodes?: number;
}

interface PeerState {
  readonly spec: PeerSpec;
  status: PeerStatus | undefined;
  statusAt: number;
  /** Requests forwarded since the status was read: counted as queued there until the next one. */
  sentSinceStatus: number;
  /** Forwarded and not finished. */
  outstanding: number;
  ejectedUntil: number;
  forwarded: number;
  failures: number;
}

const LOCAL: RouteDecision = { kind: 'local' };

export class Federation {
  readonly region: string;
  readonly selection: PeerSelection;
  readonly tau: number;
  private readonly statusTtlMs: number;
  private readonly ejectMs: number;
  private readonly peers = new Map<string, PeerState>();
  /** Regional snapshot: the prompts this router forwarded to each peer (SkyLB §3.2). */
  readonly snapshot: PrefixTrie;
  private readonly ring: HashRing;

  constructor(opts: FederationOptions) {
    this.region = opts.region;
    this.selection = opts.selection;
    this.tau = opts.tau ?? 2;
    this.statusTtlMs = opts.statusTtlMs ?? 5000;
    this.ejectMs = opts.ejectMs ?? 10_000;
    this.snapshot = new PrefixTrie({
      chunkChars: opts.chunkChars ?? 64,
      maxEntries: opts.maxEntries ?? 100_000,
      maxPrefixChars: opts.maxPrefixChars ?? 32_768,
    });
    this.ring = new HashRing(opts.vnodes ?? 100);
    for (const p of opts.peers) {
      if (this.peers.has(p.name)) throw new Error(`federation: peer '${p.name}' listed twice`);
      this.peers.set(p.name, {
        spec: p,
        status: undefined,
        statusAt: -Infinity,
        sentSinceStatus: 0,
        outstanding: 0,
        ejectedUntil: -Infinity,
        forwarded: 0,
        failures: 0,
      });
      this.ring.add(p.name);
    }
  }

  peerSpecs(): PeerSpec[] {
    return [...this.peers.values()].map((p) => p.spec);
  }

  /** A probe answered (Algorithm 1, lines 9–15). */
  setStatus(peer: string, status: PeerStatus, now: number): void {
    const p = this.peers.get(peer);
    if (!p) return;
    p.status = status;
    p.statusAt = now;
    p.sentSinceStatus = 0;
  }

  /**
   * A probe or a forward failed: the peer is unavailable until a probe answers again; a failed
   * forward (`eject`) also skips it for ejectMs whatever the probes say (passive ejection).
   */
  markFailed(peer: string, now: number, eject = true): void {
    const p = this.peers.get(peer);
    if (!p) return;
    p.failures++;
    p.status = undefined;
    if (eject) p.ejectedUntil = now + this.ejectMs;
  }

  /** Whether a peer may take a forwarded request now (RemoteAvail membership). */
  isAvailable(peer: string, now: number): boolean {
    const p = this.peers.get(peer);
    if (!p || now < p.ejectedUntil) return false;
    const s = p.status;
    if (!s || now - p.statusAt > this.statusTtlMs) return false;
    return s.availableReplicas > 0 && s.queueLength + p.sentSinceStatus <= this.tau;
  }

  /** RemoteAvail: peers available now, in configuration order. */
  available(now: number): string[] {
    const out: string[] = [];
    for (const name of this.peers.keys()) if (this.isAvailable(name, now)) out.push(name);
    return out;
  }

  /**
   * Where a request goes. `forwarded`: it came from a peer (hop marker) — never forwarded again.
   * `localAvailable`: some local replica is available (availableReplicas > 0).
   */
  route(req: RequestInfo, forwarded: boolean, localAvailable: boolean, now: number): RouteDecision {
    if (forwarded || localAvailable || this.peers.size === 0) return LOCAL;
    const avail = this.available(now);
    if (avail.length === 0) return LOCAL;
    const peer = this.select(req, avail);
    return { kind: 'peer', peer, url: this.peers.get(peer)!.spec.url };
  }

  private select(req: RequestInfo, avail: readonly string[]): string {
    if (avail.length === 1) return avail[0]!;
    if (this.selection === 'ring') {
      const set = new Set(avail);
      const key = req.sessionKey ?? req.promptText.slice(0, this.snapshot.chunkChars * 4);
      return this.ring.lookup(key, (n) => set.has(n)) ?? avail[0]!;
    }
    const ids = new Set<number>();
    for (const n of avail) {
      const id = this.snapshot.idOf(n);
      if (id !== undefined) ids.add(id);
    }
    if (ids.size > 0) {
      const m = this.snapshot.match(this.snapshot.keys(req.promptText), (id) => ids.has(id));
      if (m.chunks > 0) return this.snapshot.nameOf(m.owners[0]!)!;
    }
    // No prefix anywhere: the available peer we have the least outstanding with.
    let best = avail[0]!;
    for (const n of avail) if (this.peers.get(n)!.outstanding < this.peers.get(best)!.outstanding) best = n;
    return best;
  }

  /** The request was sent to `peer`: the snapshot learns its prompt. */
  onForwarded(req: RequestInfo, peer: string): void {
    const p = this.peers.get(peer);
    if (!p) return;
    p.sentSinceStatus++;
    p.outstanding++;
    p.forwarded++;
    if (this.selection === 'trie') this.snapshot.insert(this.snapshot.keys(req.promptText), peer);
  }

  /** A forwarded request ended; `ok: false` before any byte came back ejects the peer. */
  onDone(peer: string, ok: boolean, now: number): void {
    const p = this.peers.get(peer);
    if (!p) return;
    p.outstanding = Math.max(0, p.outstanding - 1);
    if (!ok) this.markFailed(peer, now);
  }

  /** Per-peer numbers for /metrics and reports. */
  describe(now: number): {
    peer: string;
    region: string;
    available: boolean;
    outstanding: number;
    forwarded: number;
    failures: number;
  }[] {
    return [...this.peers.values()].map((p) => ({
      peer: p.spec.name,
      region: p.spec.region,
      available: this.isAvailable(p.spec.name, now),
      outstanding: p.outstanding,
      forwarded: p.forwarded,
      failures: p.failures,
    }));
  }
}
