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
