/**
 * The fit gate's bookkeeping (PolicyTraits.fitGate): a group's gated members by size, and the walk
 * over those at or below the candidates' bound.
 */
import type { Cursor, Queued } from './scheduler-state.js';

/**
 * A group's gated members (Queued.fit) by size, smallest first. Entries are (member, stamp): one
 * whose member was ungated, gated again since or left the queue is stale and dropped on the way.
 * A pump asks none of them while the smallest is above the bound, and otherwise lifts out only
 * those at or below it — not a walk over hundreds of held requests at every completion.
 */
export class FitHeap {
  private items: Queued[] = [];
  /** Per entry: the gating it was made for, and the member's size then (its key). */
  private stamps: number[] = [];
  private fits: number[] = [];

  /** Entry i sorts before a (fit, seq) pair. */
  private less(fa: number, qa: Queued, fb: number, qb: Queued): boolean {
    return fa < fb || (fa === fb && qa.seq < qb.seq);
  }

  /** Entry i is its member's current gating. */
  private live(i: number): boolean {
    const q = this.items[i]!;
    return q.gateStamp === this.stamps[i] && q.fit === q.fit;
  }

  /** Depth-first stack for takeAtMost (reused). */
  private readonly stack: number[] = [];

  /**
   * The earliest-arrived live member at or below `bound` that arrived after `after` (a seq);
   * undefined when none. Reads only the entries at or below the bound (the heap orders by size:
   * a subtree whose root is above it is skipped whole) and moves none: a walk whose bound drops
   * after its first push pays for the few still below it, not for lifting out and putting back
   * everything the first bound admitted.
   */
  firstAtMost(bound: number, after: number): Queued | undefined {
    const { items, fits, stack } = this;
    const n = items.length;
    if (n === 0 || !(fits[0]! <= bound)) return undefined;
    let best: Queued | undefined;
    stack.length = 0;
    stack.push(0);
    while (stack.length > 0) {
      const i = stack.pop()!;
      const q = items[i]!;
      if (q.seq > after && (best === undefined || q.seq < best.seq) && this.live(i)) best = q;
      const l = 2 * i + 1;
      if (l < n && fits[l]! <= bound) stack.push(l);
      if (l + 1 < n && fits[l + 1]! <= bound) stack.push(l + 1);
    }
    return best;
  }

  push(q: Queued): void {
    const { items, stamps, fits } = this;
    const f = q.fit;
    let i = items.length;
    items.push(q);
    stamps.push(0);
    fits.push(0);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(f, q, fits[p]!, items[p]!)) break;
      items[i] = items[p]!;
      stamps[i] = stamps[p]!;
      fits[i] = fits[p]!;
      i = p;
    }
    items[i] = q;
    stamps[i] = q.gateStamp;
    fits[i] = f;
  }

  /** Whether a live member's size is at or below `bound` (stale entries on top dropped). */
  hasAtMost(bound: number): boolean {
    while (this.items.length > 0) {
      if (this.live(0)) return this.fits[0]! <= bound;
      this.removeTop();
    }
    return false;
  }

  /** Live entries only, when stale ones outnumber them (members asked again and again). */
  compact(live: number): void {
    if (this.items.length <= 2 * live + 32) return;
    const keep: Queued[] = [];
    for (let i = 0; i < this.items.length; i++) if (this.live(i)) keep.push(this.items[i]!);
    this.clear();
    for (const q of keep) this.push(q);
  }

  clear(): void {
    this.items.length = 0;
    this.stamps.length = 0;
    this.fits.length = 0;
  }

  private removeTop(): void {
    const { items, stamps, fits } = this;
    const last = items.pop()!;
    const lastStamp = stamps.pop()!;
    const lastFit = fits.pop()!;
    const n = items.length;
    if (n === 0) return;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const m = r < n && this.less(fits[r]!, items[r]!, fits[l]!, items[l]!) ? r : l;
      if (!this.less(fits[m]!, items[m]!, lastFit, last)) break;
      items[i] = items[m]!;
      stamps[i] = stamps[m]!;
      fits[i] = fits[m]!;
      i = m;
    }
    items[i] = last;
    stamps[i] = lastStamp;
    fits[i] = lastFit;
  }
}

/**
 * A gated group's walk: each step the earliest member after the last one at or below the
 * cursor's bound as last computed. Pushes only lower a bound within a pump, so a bound not yet
 * recomputed after one can only admit more (the pump's fit check then skips those, as the
 * ask-everyone walk would); a member asked and held again is gated anew but lies behind the walk.
 */
export class GatedWalk implements Iterator<Queued> {
  cursor: Cursor | undefined;
  constructor(
    private readonly fits: FitHeap,
    private after: number,
  ) {}

  next(): IteratorResult<Queued> {
    const q = this.fits.firstAtMost(this.cursor!.bound, this.after);
    if (q === undefined) return { done: true, value: undefined };
    this.after = q.seq;
    return { done: false, value: q };
  }
}

/** Queued member `q` is no longer held until it fits (if it was). */
export function ungate(q: Queued): void {
  if (q.fit === q.fit) {
    q.fit = NaN;
    q.group.gated--;
  }
}
