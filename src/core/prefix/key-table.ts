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
 * KeyTable pairs inserted it twice, into two cold tables; a lookup in either lane is one probe.
 *
 * Open addressing with linear probing, two Int32 per slot (key + 1, 0 empty; both lanes'
 * generations, 16 bits each, 0: never), at most half full. A lane's generations count 1..65,535
 * and wrap; a key is in a lane while its generation there is the lane's current or previous one,
 * and live while some attached lane has it. Dead keys stay until a rebuild drops them, which also
 * clears every generation no longer current or previous (so a wrapped count never revives one: a
 * rebuild comes at least every 32,768 turnovers). A rebuild sizes the table at 2.5 × (its live
 * keys + the longest chain recorded), not rounded to a power of two, and one that must grow it at
 * least doubles it (growing by a quarter rebuilt four times as often, and each fresh array evicted
 * the decisions' working set from the cache: the 50k-token bench's other decisions were slower
 * than base's), so it holds 20–40 bytes per key (and per key of that chain; 16 slots at least);
 * `maintain` does it ahead, outside the routing decision, once the longest chain would no longer
 * fit below half full, and an insert into a half-full table does it at once.
 */
export class LaneTable {
  /** Per slot: key + 1, then lane 0's generation | lane 1's << 16. */
  private slots: Int32Array;
  /** Slots (any count: a key's first slot is its hash scaled to it, so rebuilds size it exactly). */
  private n: number;
  /** n / 2^32. */
  private scale: number;
  /** Slots in use, dead keys included. */
  private used = 0;
  /** Per lane: its current generation, 1..65,535 (0: not attached). */
  private cur0 = 0;
  private cur1 = 0;
  /** Per lane: the generation before the current one (0: none). */
  private prev0 = 0;
  private prev1 = 0;
  /** Turnovers (of either lane) since the last rebuild. */
  private turns = 0;

  constructor(expected = 1024) {
    const n = slotsFor(expected);
    this.slots = new Int32Array(2 * n);
    this.n = n;
    this.scale = n / 2 ** 32;
  }

  /** Lane `lane` starts recording here, remembering nothing (any generations it left are cleared). */
  attach(lane: 0 | 1): void {
    const slots = this.slots;
    const keep = lane === 0 ? 0xffff0000 : 0xffff;
    for (let s = 1; s < slots.length; s += 2) slots[s] = slots[s]! & keep;
    if (lane === 0) {
      this.cur0 = 1;
      this.prev0 = 0;
    } else {
      this.cur1 = 1;
      this.prev1 = 0;
    }
  }

  /** Lane `lane` stops; true when no lane is left (the table can go). */
  detach(lane: 0 | 1): boolean {
    if (lane === 0) this.cur0 = this.prev0 = 0;
    else this.cur1 = this.prev1 = 0;
    return this.cur0 === 0 && this.cur1 === 0;
  }

  /** Slots allocated. */
  get capacity(): number {
    return this.slots.length / 2;
  }

  get bytes(): number {
    return 4 * this.slots.length;
  }

  /** Slots in use (live keys and dead ones not yet dropped). */
  get occupied(): number {
    return this.used;
  }

  /**
   * Index of `key`'s slot (its first Int32); not there: −1 − the index of the empty slot it would
   * take (valid for `set` until the table next changes).
   */
  find(key: number): number {
    const slots = this.slots;
    const v = key + 1;
    const n = this.n;
    // (| 0: an int index; a float one costs V8 a slower element access.)
    let i = ((Math.imul(key, 0x9e3779b1) >>> 0) * this.scale) | 0;
    for (;;) {
      const x = slots[2 * i]!;
      if (x === v) return 2 * i;
      if (x === 0) return -1 - 2 * i;
      if (++i === n) i = 0;
    }
  }

  /** Set by touchRun: whether its walk stopped at a key already in the lane's current generation. */
  stopped = false;

  /**
   * What a record's `touch` does (find the key; stop at one in `lane`'s current generation, else put
   * it there) for keys[j], keys[j − 1], … in one loop, at most `room` of them (the room left in the
   * lane's current generation: a turnover is the caller's). Returns the keys put; it stops early
   * (`stopped`) at a key already current, and returns before a key it would insert into a half-full
   * table (the caller's set rebuilds it). One loop with the table in locals, not find, isCurrent and
   * set per key: a prompt new to the backend puts some 300 keys (issue #30: the recording decision).
   */
  touchRun(keys: Int32Array, j: number, room: number, lane: 0 | 1): number {
    this.stopped = false;
    const slots = this.slots;
    const n = this.n;
    const scale = this.scale;
    const cur = lane === 0 ? this.cur0 : this.cur1;
    let used = this.used;
    let k = 0;
    for (; k < room && j - k >= 0; k++) {
      const key = keys[j - k]!;
      const v = key + 1;
      let i = ((Math.imul(key, 0x9e3779b1) >>> 0) * scale) | 0;
      let x = slots[2 * i]!;
      while (x !== v && x !== 0) {
        if (++i === n) i = 0;
        x = slots[2 * i]!;
      }
      const g = 2 * i + 1;
      if (x === 0) {
        if ((used + 1) * 2 > n) break;
        slots[2 * i] = v;
        slots[g] = lane === 0 ? cur : cur << 16;
        used++;
        continue;
      }
      const w = slots[g]!;
      if (lane === 0) {
        if ((w & 0xffff) === cur) {
          this.stopped = true;
          break;
        }
        slots[g] = (w & 0xffff0000) | cur;
      } else {
        if (w >>> 16 === cur) {
          this.stopped = true;
          break;
        }
        slots[g] = (w & 0xffff) | (cur << 16);
      }
    }
    this.used = used;
    return k;
  }

  /** Sum of the slots `warm` read (kept so the reads are not optimised away). */
  private touched = 0;

  /**
   * Reads the first slot of each of `keys[0..end)`, and nothing else: a prompt new to the backend
   * inserts some 300 keys into a table the prompt's own text has pushed out of the CPU's caches,
   * and one insert's probe depends on nothing the others do, so these reads go out together and
   * the inserts that follow find their slots cached (issue #30: the recording decision's p99).
   */
  warm(keys: Int32Array, end: number): void {
    const slots = this.slots;
    const scale = this.scale;
    let sum = 0;
    for (let j = 0; j < end; j++)
      sum = (sum + slots[2 * (((Math.imul(keys[j]!, 0x9e3779b1) >>> 0) * scale) | 0)]!) | 0;
    this.touched = sum;
  }

  /** Whether `lane` has `key` in its current or previous generation. */
  has(key: number, lane: 0 | 1): boolean {
    const at = this.find(key);
    return at >= 0 && this.fresh(this.slots[at + 1]!, lane);
  }

  /** Whether the key at slot index `at` (from find) is in `lane`'s current generation. */
  isCurrent(at: number, lane: 0 | 1): boolean {
    const w = this.slots[at + 1]!;
    return lane === 0 ? (w & 0xffff) === this.cur0 : w >>> 16 === this.cur1;
  }

  /** Puts `key` in `lane`'s current generation; `at`: what find answered for it since the table last changed. */
  set(at: number, key: number, lane: 0 | 1): void {
    if (at < 0) {
      if ((this.used + 1) * 2 > this.capacity) {
        this.rebuild(1 + this.reserve);
        at = this.find(key);
      }
      at = -1 - at;
      this.slots[at] = key + 1;
      this.slots[at + 1] = 0;
      this.used++;
    }
    const w = this.slots[at + 1]!;
    this.slots[at + 1] = lane === 0 ? (w & 0xffff0000) | this.cur0 : (w & 0xffff) | (this.cur1 << 16);
  }

  /** `lane` starts a new generation: its previous one is forgotten. */
  turn(lane: 0 | 1): void {
    if (lane === 0) {
      this.prev0 = this.cur0;
      this.cur0 = this.cur0 === 0xffff ? 1 : this.cur0 + 1;
    } else {
      this.prev1 = this.cur1;
      this.cur1 = this.cur1 === 0xffff ? 1 : this.cur1 + 1;
    }
    if (++this.turns >= 0x8000) this.rebuild(0);
  }

  /** Keys one prompt may insert (the longest chain recorded): the room `maintain` keeps. */
  private reserve = 0;

  /** A chain of `keys` keys is about to be recorded. */
  noteChain(keys: number): void {
    if (keys > this.reserve) this.reserve = keys;
  }

  /**
   * Rebuilds ahead of need (outside a decision), dead keys dropped: when the longest chain recorded
   * would not fit before the table is half full (the insert that finds it so rebuilds at once).
   */
  maintain(): void {
    if ((this.used + this.reserve) * 2 > this.capacity) this.rebuild(this.reserve);
  }

  /** Keys some attached lane remembers (a pass over the table: tests). */
  live(): number {
    let n = 0;
    for (let s = 0; s < this.slots.length; s += 2)
      if (this.slots[s] !== 0 && this.liveWord(this.slots[s + 1]!) !== 0) n++;
    return n;
  }

  private fresh(w: number, lane: 0 | 1): boolean {
    if (lane === 0) {
      const g = w & 0xffff;
      return g !== 0 && (g === this.cur0 || g === this.prev0);
    }
    const g = w >>> 16;
    return g !== 0 && (g === this.cur1 || g === this.prev1);
  }

  /** A slot's generations word with the lanes that no longer have the key cleared (0: dead). */
  private liveWord(w: number): number {
    return (this.fresh(w, 0) ? w & 0xffff : 0) | (this.fresh(w, 1) ? w & 0xffff0000 : 0);
  }

  /** Copies the live keys into a table of 2.5 × (live + `extra`) slots, or twice as many as now if more (16 at least). */
  private rebuild(extra: number): void {
    const old = this.slots;
    let live = 0;
    for (let s = 0; s < old.length; s += 2) if (old[s] !== 0 && this.liveWord(old[s + 1]!) !== 0) live++;
    const want = Math.ceil(2.5 * (live + extra));
    const n = Math.max(16, want > this.n ? Math.max(want, 2 * this.n) : want);
    const scale = n / 2 ** 32;
    const slots = new Int32Array(2 * n);
    for (let s = 0; s < old.length; s += 2) {
      const v = old[s]!;
      const w = v === 0 ? 0 : this.liveWord(old[s + 1]!);
      if (w === 0) continue;
      let i = ((Math.imul(v - 1, 0x9e3779b1) >>> 0) * scale) | 0;
      while (slots[2 * i] !== 0) if (++i === n) i = 0;
      slots[2 * i] = v;
      slots[2 * i + 1] = w;
    }
    this.slots = slots;
    this.n = n;
    this.scale = scale;
    this.used = live;
    this.turns = 0;
  }
}
