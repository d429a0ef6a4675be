/**
 * Consistent hashing on a ring with virtual nodes (SkyLB §3.2, SkyLB-CH; Karger et al.'s ring
 * hash). Each member owns `vnodes × weight` points; a key goes to the owner of the first point at
 * or after its hash, and unavailable owners are skipped by walking on (SkyLB Listing 1, line 26),
 * so a key moves only while its home is unavailable and returns when it is back.
 */

/** 32-bit FNV-1a then a murmur3 finaliser: FNV alone spreads similar short strings poorly. */
export function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

export class HashRing {
  readonly vnodes: number;
  private readonly weights = new Map<string, number>();
  /** Sorted point hashes and, in step, the member index owning each. Rebuilt on membership change. */
  private points = new Uint32Array(0);
  private owners = new Int32Array(0);
  private names: string[] = [];
  private dirty = false;

  constructor(vnodes: number) {
    if (!Number.isInteger(vnodes) || vnodes <= 0)
      throw new Error('hash ring: vnodes must be a positive integer');
    this.vnodes = vnodes;
  }

  get size(): number {
    return this.weights.size;
  }

  has(name: string): boolean {
    return this.weights.has(name);
  }

  /** Add a member (or change its weight). Weight scales its share of points (at least one point). */
  add(name: string, weight = 1): void {
    if (!(weight > 0) || !Number.isFinite(weight))
      throw new Error(`hash ring: weight of '${name}' must be > 0`);
    if (this.weights.get(name) === weight) return;
    this.weights.set(name, weight);
    this.dirty = true;
  }

  remove(name: string): void {
    if (this.weights.delete(name)) this.dirty = true;
  }

  /**
   * The member a key maps to: the first point clockwise from hash(key) whose owner passes
   * `isAvailable`, walking on past unavailable ones. Undefined when none is available.
   */
  lookup(key: string, isAvailable: (name: string) => boolean = () => true): string | undefined {
    if (this.dirty) this.rebuild();
    const n = this.points.length;
    if (n === 0) return undefined;
    const h = hash32(key);
    // First point ≥ h (binary search); wraps to 0 past the end.
    let lo = 0;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.points[mid]! < h) lo = mid + 1;
      else hi = mid;
    }
    // Each member is asked at most once, and the walk ends once all have refused: O(points) worst case.
    let asked: Uint8Array | undefined;
    let refused = 0;
    for (let k = 0; k < n; k++) {
      const o = this.owners[(lo + k) % n]!;
      if (asked?.[o]) continue;
      const name = this.names[o]!;
      if (isAvailable(name)) return name;
      (asked ??= new Uint8Array(this.names.length))[o] = 1;
      if (++refused === this.names.length) return undefined;
    }
    return undefined;
  }

  private rebuild(): void {
    this.names = [...this.weights.keys()].sort();
    const pts: { h: number; o: number }[] = [];
    this.names.forEach((name, o) => {
      const count = Math.max(1, Math.round(this.vnodes * this.weights.get(name)!));
      for (let v = 0; v < count; v++) pts.push({ h: hash32(`${name}#${v}`), o });
    });
    // Ties (hash collisions) broken by owner so the ring does not depend on insertion order.
    pts.sort((a, b) => a.h - b.h || a.o - b.o);
    this.points = Uint32Array.from(pts, (p) => p.h);
    this.owners = Int32Array.from(pts, (p) => p.o);
    this.dirty = false;
  }
}
