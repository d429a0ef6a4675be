/**
 * A binary min-heap of timed events, ordered by (time, priority, insertion order). Events at the
 * same instant run by priority (the simulator lets arrivals reach an engine before its iteration
 * boundary at that instant is processed), then first-in first-out — so a run is deterministic
 * whatever the heap's internal layout. Parallel arrays, no per-swap allocation: this is the
 * simulator's hottest loop.
 */
export class EventHeap<T> {
  private readonly times: number[] = [];
  private readonly prios: number[] = [];
  private readonly seqs: number[] = [];
  private readonly items: T[] = [];
  private nextSeq = 0;

  get size(): number {
    return this.items.length;
  }

  /** Time of the earliest event, undefined when empty. */
  peekTime(): number | undefined {
    return this.times[0];
  }

  push(time: number, priority: number, item: T): void {
    let i = this.items.length;
    const seq = this.nextSeq++;
    this.times.push(time);
    this.prios.push(priority);
    this.seqs.push(seq);
    this.items.push(item);
    // Sift up: move the hole toward the root while the parent is later.
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.before(time, priority, seq, parent)) break;
      this.move(parent, i);
      i = parent;
    }
    this.set(i, time, priority, seq, item);
  }

  pop(): T | undefined {
    const n = this.items.length;
    if (n === 0) return undefined;
    const top = this.items[0];
    const lastT = this.times.pop()!;
    const lastP = this.prios.pop()!;
    const lastS = this.seqs.pop()!;
    const lastI = this.items.pop()!;
    const m = n - 1;
    if (m === 0) return top;
    // Sift the former last element down from the root.
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= m) break;
      const r = l + 1;
      const c = r < m && this.less(r, l) ? r : l;
      if (this.before(lastT, lastP, lastS, c)) break;
      this.move(c, i);
      i = c;
    }
    this.set(i, lastT, lastP, lastS, lastI);
    return top;
  }

  /** Does (t, p, s) come strictly before the entry at j? */
  private before(t: number, p: number, s: number, j: number): boolean {
    const tj = this.times[j]!;
    if (t !== tj) return t < tj;
    const pj = this.prios[j]!;
    if (p !== pj) return p < pj;
    return s < this.seqs[j]!;
  }

  private less(a: number, b: number): boolean {
    return this.before(this.times[a]!, this.prios[a]!, this.seqs[a]!, b);
  }

  private move(from: number, to: number): void {
    this.times[to] = this.times[from]!;
    this.prios[to] = this.prios[from]!;
    this.seqs[to] = this.seqs[from]!;
    this.items[to] = this.items[from]!;
  }

  private set(i: number, t: number, p: number, s: number, item: T): void {
    this.times[i] = t;
    this.prios[i] = p;
    this.seqs[i] = s;
    this.items[i] = item;
  }
}
