/**
 * A set of small non-negative integers (below 2^31 − 1: PrefixCredit's chunk keys folded to 30
 * bits) in one Int32Array, open addressing with linear probing, at most half full. It replaces a
 * `Set<number>` on the prefix credit's hot path (issue #30): a 50k-token prompt new to a backend
 * adds ~300 keys at dispatch and every pick asks ~10 per candidate. Against a Set it holds no heap
 * object per key (nothing for the GC to trace or move), asks a multiply and a probe or two per
 * lookup, takes 8–16 bytes per key, and `clear` is one fill of the array (a generation turning
 * over reuses its memory instead of dropping a large Set to the GC).
 *
 * Membership is exact: it answers as a `Set<number>` of the same keys would.
 */
export class KeyTable {
  /** Key + 1 per slot; 0 marks an empty slot. */
  private slots: Int32Array;
  private mask: number;
  /** 32 − log2(slots): the multiply–shift hash takes the product's top bits. */
  private shift: number;
  private count = 0;

  /** `expected`: keys it is sized for at first (it grows by doubling beyond). */
  constructor(expected = 512) {
    const n = slotsFor(expected);
    this.slots = new Int32Array(n);
    this.mask = n - 1;
    this.shift = 32 - Math.log2(n);
  }

  get size(): number {
    return this.count;
  }

  /** Slots allocated (4 bytes each). */
  get capacity(): number {
    return this.slots.length;
  }

  has(key: number): boolean {
    const slots = this.slots;
    const v = key + 1;
    let i = Math.imul(key, 0x9e3779b1) >>> this.shift;
    for (;;) {
      const x = slots[i]!;
      if (x === v) return true;
      if (x === 0) return false;
      i = (i + 1) & this.mask;
    }
  }

  /** Adds `key`; false when it was there already. */
  add(key: number): boolean {
    if ((this.count + 1) * 2 > this.slots.length) this.grow();
    const slots = this.slots;
    const v = key + 1;
    let i = Math.imul(key, 0x9e3779b1) >>> this.shift;
    for (;;) {
      const x = slots[i]!;
      if (x === v) return false;
      if (x === 0) break;
      i = (i + 1) & this.mask;
    }
    slots[i] = v;
    this.count++;
    return true;
  }

  /** Empties it, keeping its memory (or, when it is far larger than `expected` needs, shrinking). */
  clear(expected: number): void {
    const n = slotsFor(expected);
    if (this.slots.length > 2 * n) this.resize(n);
    else this.slots.fill(0);
    this.count = 0;
  }

  private grow(): void {
    const old = this.slots;
    this.resize(old.length * 2);
    const slots = this.slots;
    for (let j = 0; j < old.length; j++) {
      const v = old[j]!;
      if (v === 0) continue;
      let i = Math.imul(v - 1, 0x9e3779b1) >>> this.shift;
      while (slots[i] !== 0) i = (i + 1) & this.mask;
      slots[i] = v;
    }
  }

  private resize(n: number): void {
    this.slots = new Int32Array(n);
    this.mask = n - 1;
    this.shift = 32 - Math.log2(n);
  }
}

/** Slots for `keys` keys at most half full: a power of two, at least 16. */
function slotsFor(keys: number): number {
  let n = 16;
  while (n < 2 * keys) n *= 2;
  return n;
}

/**
 * One backend's chunk keys for up to two generational records ("lanes": the estimated-wait
 * policy's learned record and its four times longer affinity memory, issue #30), in one table: per
 * key the generation each lane last touched it in. A prompt new to the backend is inserted once —
 * the second lane's walk finds the slots the first just wrote, in warm cache lines — where two
 * KeyTable pairs inserted it twice, into two cold tables.
 *
 * Open addressing with linear probing, three Int32 per slot (key + 1, 0 empty; lane 0's
 * generation; lane 1's), at most half full. A key is live while some attached lane's generation
 * for it is its current or previous one; dead keys stay until a rebuild drops them. A rebuild
 * sizes the table for three times its live keys (a power of two: less than six times), so it takes
 * at most 72 bytes per live key; `maintain` does it ahead, outside the routing decision, once the
 * table is two-fifths full, and an insert into a half-full table does it at once.
 */
export class LaneTable {
  /** Per slot: key + 1, lane 0's generation, lane 1's (0: never touched there). */
  private slots: Int32Array;
  private mask: number;
  private shift: number;
  /** Slots in use, dead keys included. */
  private used = 0;
  /** Per lane: its current generation (kept when detached, so a lane attached again starts past it). */
  readonly cur = new Int32Array(2);
  private on0 = false;
  private on1 = false;

  constructor(expected = 1024) {
    const n = slotsFor(expected);
    this.slots = new Int32Array(3 * n);
    this.mask = n - 1;
    this.shift = 32 - Math.log2(n);
  }

  /** Lane `lane` starts recording here (at a generation no key in the table holds for it). */
  attach(lane: 0 | 1): void {
    if (lane === 0) this.on0 = true;
    else this.on1 = true;
    this.cur[lane] = this.cur[lane]! + 2;
  }

  /** Lane `lane` stops; true when no lane is left (the table can go). */
  detach(lane: 0 | 1): boolean {
    if (lane === 0) this.on0 = false;
    else this.on1 = false;
    return !this.on0 && !this.on1;
  }

  /** Slots allocated. */
  get capacity(): number {
    return this.slots.length / 3;
  }

  get bytes(): number {
    return 4 * this.slots.length;
  }

  /** Slots in use (live keys and dead ones not yet dropped). */
  get occupied(): number {
    return this.used;
  }

  /** Index of `key`'s slot (its first Int32), or −1. */
  find(key: number): number {
    const slots = this.slots;
    const v = key + 1;
    let i = Math.imul(key, 0x9e3779b1) >>> this.shift;
    for (;;) {
      const x = slots[3 * i]!;
      if (x === v) return 3 * i;
      if (x === 0) return -1;
      i = (i + 1) & this.mask;
    }
  }

  /** The generation `lane` last touched `key` in (0: never, or the key was dropped). */
  genOf(key: number, lane: 0 | 1): number {
    const at = this.find(key);
    return at < 0 ? 0 : this.slots[at + 1 + lane]!;
  }

  /** `lane`'s generation for the key at slot index `at` (from find). */
  genAt(at: number, lane: 0 | 1): number {
    return this.slots[at + 1 + lane]!;
  }

  /** Sets `key`'s generation in `lane` to `gen`; `at`: its slot index from find (−1: not there). */
  set(at: number, key: number, lane: 0 | 1, gen: number): void {
    if (at >= 0) {
      this.slots[at + 1 + lane] = gen;
      return;
    }
    if ((this.used + 1) * 2 > this.capacity) this.rebuild(1);
    const slots = this.slots;
    let i = Math.imul(key, 0x9e3779b1) >>> this.shift;
    while (slots[3 * i] !== 0) i = (i + 1) & this.mask;
    slots[3 * i] = key + 1;
    slots[3 * i + 1 + lane] = gen;
    slots[3 * i + 2 - lane] = 0;
    this.used++;
  }

  /** Rebuilds ahead of need (outside a decision): when two-fifths full, dead keys dropped. */
  maintain(): void {
    if (this.used * 5 > this.capacity * 2) this.rebuild(0);
  }

  /** Keys some attached lane remembers (a pass over the table: tests, describe). */
  live(): number {
    let n = 0;
    for (let s = 0; s < this.slots.length; s += 3) if (this.slots[s] !== 0 && this.isLive(s)) n++;
    return n;
  }

  private isLive(s: number): boolean {
    const slots = this.slots;
    return (this.on0 && slots[s + 1]! >= this.cur[0]! - 1) || (this.on1 && slots[s + 2]! >= this.cur[1]! - 1);
  }

  /** Copies the live keys into a table of a power of two ≥ 3 × (live + `extra`) slots. */
  private rebuild(extra: number): void {
    const old = this.slots;
    let live = 0;
    for (let s = 0; s < old.length; s += 3) if (old[s] !== 0 && this.isLive(s)) live++;
    let n = 16;
    while (n < 3 * (live + extra)) n *= 2;
    const slots = new Int32Array(3 * n);
    const mask = n - 1;
    const shift = 32 - Math.log2(n);
    for (let s = 0; s < old.length; s += 3) {
      const v = old[s]!;
      if (v === 0 || !this.isLive(s)) continue;
      let i = Math.imul(v - 1, 0x9e3779b1) >>> shift;
      while (slots[3 * i] !== 0) i = (i + 1) & mask;
      slots[3 * i] = v;
      slots[3 * i + 1] = old[s + 1]!;
      slots[3 * i + 2] = old[s + 2]!;
    }
    this.slots = slots;
    this.mask = mask;
    this.shift = shift;
    this.used = live;
  }
}
