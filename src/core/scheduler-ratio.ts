/**
 * The response-ratio order of held requests (Policy.queueOrder kind 'response-ratio'): heaps of
 * members by ratio, a group's members in slot arrays, and the walk that orders a long queue
 * without computing every member's ratio.
 */
import type { Queued } from './scheduler-state.js';

/** A member's response ratio at `now`: (waited + size) / size, waited in seconds. */
export function ratioOf(q: Queued, now: number): number {
  return (Math.max(0, now - q.arrivedAt) / 1000 + q.size) / q.size;
}

/** Members in response-ratio order, highest first (then earlier arrival). */
export interface RatioOrder {
  /** The highest member not offered yet, removed; undefined when none is left. */
  pop(): Queued | undefined;
  /** The ratio of the member pop() returned last. */
  readonly poppedKey: number;
}

/**
 * Members by response ratio at one instant, highest first (then earlier arrival): built in O(n),
 * popped in O(log n). Reused from pump to pump (a queue of hundreds held by late binding is
 * ordered again at every pump that may let one go; fresh arrays each time were garbage).
 */
export class RatioHeap implements RatioOrder {
  /** Members in heap order in [0, n); entries past n are stale (overwritten by the next fill). */
  private readonly items: Queued[] = [];
  private keys = new Float64Array(64);
  private n = 0;
  poppedKey = 0;

  get size(): number {
    return this.n;
  }

  /** The highest ratio (the heap must not be empty). */
  get topKey(): number {
    return this.keys[0]!;
  }

  clear(): this {
    this.n = 0;
    return this;
  }

  /** Adds a member with its ratio; build() orders them. */
  add(q: Queued, key: number): void {
    const n = this.n;
    if (n === this.keys.length) {
      const grown = new Float64Array(n * 2);
      grown.set(this.keys);
      this.keys = grown;
    }
    this.items[n] = q;
    this.keys[n] = key;
    this.n = n + 1;
  }

  build(): this {
    for (let i = (this.n >> 1) - 1; i >= 0; i--) this.down(i);
    return this;
  }

  pop(): Queued | undefined {
    const n = this.n;
    if (n === 0) return undefined;
    const items = this.items;
    const keys = this.keys;
    const top = items[0]!;
    this.poppedKey = keys[0]!;
    const last = n - 1;
    this.n = last;
    if (last > 0) {
      items[0] = items[last]!;
      keys[0] = keys[last]!;
      this.down(0);
    }
    return top;
  }

  private down(i: number): void {
    const n = this.n;
    const items = this.items;
    const keys = this.keys;
    const q = items[i]!;
    const k = keys[i]!;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      let m = l;
      let km = keys[l]!;
      if (r < n) {
        const kr = keys[r]!;
        if (kr > km || (kr === km && items[r]!.seq < items[l]!.seq)) {
          m = r;
          km = kr;
        }
      }
      // Stop when the child is not above the one sinking.
      if (!(km > k || (km === k && items[m]!.seq < q.seq))) break;
      items[i] = items[m]!;
      keys[i] = km;
      i = m;
    }
    items[i] = q;
    keys[i] = k;
  }
}

/**
 * A group's members in slot arrays (a member leaving takes the last one's slot), for ordering
 * them by response ratio without visiting each member object: arrival times and 1 / (1000 size)
 * side by side, read in one tight loop (RatioWalk).
 */
export class RatioIndex {
  members: Queued[] = [];
  arrived = new Float64Array(16);
  /** 1 / (1000 · size), as of the member's size. */
  rate = new Float64Array(16);
  n = 0;
  /** Every member present at the last sizing sweep was sized in this epoch (NaN: sweep again). */
  sizedEpoch = NaN;
  /** Members that joined since that sweep, in arrival order (sized at the next walk). */
  joined: Queued[] = [];

  add(q: Queued): void {
    const n = this.n;
    if (n === this.arrived.length) {
      const arrived = new Float64Array(n * 2);
      arrived.set(this.arrived);
      this.arrived = arrived;
      const rate = new Float64Array(n * 2);
      rate.set(this.rate);
      this.rate = rate;
    }
    this.members[n] = q;
    this.arrived[n] = q.arrivedAt;
    this.rate[n] = 1 / (1000 * q.size);
    q.slot = n;
    this.n = n + 1;
    this.joined.push(q);
    // A group that is never ordered (always held) must not pile up joiners: sweep it all instead.
    if (this.joined.length > 64 && this.joined.length > 2 * n) {
      this.joined.length = 0;
      this.sizedEpoch = NaN;
    }
  }

  remove(q: Queued): void {
    const i = q.slot;
    const last = --this.n;
    if (i !== last) {
      const moved = this.members[last]!;
      this.members[i] = moved;
      this.arrived[i] = this.arrived[last]!;
      this.rate[i] = this.rate[last]!;
      moved.slot = i;
    }
    this.members.pop(); // (a fast builtin; setting length is a runtime call)
    q.slot = -1;
  }
}

/** Members a walk orders exactly up front (by ratio, computed); the rest only if these run out. */
export const WALK_CANDIDATES = 32;

/**
 * A whole group in response-ratio order at one instant, without computing every member's ratio:
 * a pump usually offers a few members before one is held (the freed room is taken), yet the
 * group may hold hundreds. Each member's ratio is about 1 + waited · rate (rate = 1 / (1000
 * size)); this product, a multiplication instead of two divisions, is within a few units in the
 * last place of the ratio the order uses. The `candidates` members highest by it are ordered
 * by their exact ratio; one is offered only while its exact ratio is above what any other member's
 * could be (the others' highest estimate, widened by 1e-12 — far more than the rounding). Past
 * that, every member not offered yet is ordered exactly, as before. The order is the same as
 * ordering every member exactly: each member offered is the highest by exact ratio (then
 * arrival) of those left.
 */
export class RatioWalk implements RatioOrder {
  private readonly candidates = new RatioHeap();
  /** Every member not offered yet, once the candidates are not enough. */
  private readonly rest = new RatioHeap();
  private full = false;
  /** No member outside the candidates has an exact ratio at or above this. */
  private bound = -Infinity;
  private index: RatioIndex | undefined;
  private stamp = 0;
  private now = 0;
  /** Every member's estimate, by slot (scratch). */
  private estimates = new Float64Array(64);
  private readonly topEstimates: Float64Array;
  private readonly topSlots: Int32Array;
  poppedKey = 0;

  constructor(private readonly size: number) {
    this.topEstimates = new Float64Array(size);
    this.topSlots = new Int32Array(size);
  }

  /**
   * Starts a walk over the index's members (every one sized). False when an estimate is not a
   * finite number (a NaN arrival, an overflow): the caller orders every member exactly instead.
   */
  start(index: RatioIndex, stamp: number, now: number): boolean {
    this.index = index;
    this.stamp = stamp;
    this.now = now;
    this.full = false;
    this.candidates.clear();
    const n = index.n;
    const members = index.members;
    const arrived = index.arrived;
    const rate = index.rate;
    const most = this.size;
    if (n <= most) {
      for (let i = 0; i < n; i++) {
        const q = members[i]!;
        const k = ratioOf(q, now);
        if (!Number.isFinite(k)) return false;
        this.candidates.add(q, k);
      }
      this.candidates.build();
      this.bound = -Infinity;
      return true;
    }
    // Every estimate first (a tight loop), then the `most` highest: a min-heap of them (its least
    // is the bar to enter), and the highest of the others.
    if (this.estimates.length < n) this.estimates = new Float64Array(n * 2);
    const all = this.estimates;
    for (let i = 0; i < n; i++) all[i] = Math.max(0, now - arrived[i]!) * rate[i]!;
    const est = this.topEstimates;
    const slots = this.topSlots;
    let size = 0;
    let bar = -Infinity;
    let others = -Infinity;
    for (let i = 0; i < n; i++) {
      const e = all[i]!;
      if (e <= bar) {
        if (e > others) others = e;
        continue;
      }
      if (!(e < Infinity)) return false; // NaN or ∞
      if (size < most) {
        let j = size++;
        while (j > 0) {
          const p = (j - 1) >> 1;
          if (est[p]! <= e) break;
          est[j] = est[p]!;
          slots[j] = slots[p]!;
          j = p;
        }
        est[j] = e;
        slots[j] = i;
        if (size === most) bar = est[0]!;
        continue;
      }
      if (bar > others) others = bar;
      let j = 0;
      for (;;) {
        const l = 2 * j + 1;
        if (l >= size) break;
        const r = l + 1;
        const c = r < size && est[r]! < est[l]! ? r : l;
        if (est[c]! >= e) break;
        est[j] = est[c]!;
        slots[j] = slots[c]!;
        j = c;
      }
      est[j] = e;
      slots[j] = i;
      bar = est[0]!;
    }
    for (let j = 0; j < size; j++) {
      const q = members[slots[j]!]!;
      const k = ratioOf(q, now);
      if (!Number.isFinite(k)) return false;
      this.candidates.add(q, k);
    }
    this.candidates.build();
    this.bound = (others + 1) * (1 + 1e-12);
    return true;
  }

  pop(): Queued | undefined {
    if (!this.full) {
      const c = this.candidates;
      if (c.size > 0 && c.topKey > this.bound) {
        const q = c.pop()!;
        this.poppedKey = c.poppedKey;
        q.walk = this.stamp;
        return q;
      }
      if (this.bound === -Infinity) return undefined; // the candidates were every member
      // Past what the candidates can tell: order every member not offered yet exactly.
      this.full = true;
      const index = this.index!;
      const rest = this.rest.clear();
      for (let i = 0; i < index.n; i++) {
        const q = index.members[i]!;
        if (q.walk !== this.stamp) rest.add(q, ratioOf(q, this.now));
      }
      rest.build();
    }
    const q = this.rest.pop();
    this.poppedKey = this.rest.poppedKey;
    return q;
  }
}
