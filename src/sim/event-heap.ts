/**
 * A binary min-heap of timed events. Ties break by insertion order, so a run is deterministic
 * whatever the heap's internal layout.
 */
export class EventHeap<T> {
  private times: number[] = [];
  private seqs: number[] = [];
  private items: T[] = [];
  private nextSeq = 0;

  get size(): number {
    return this.items.length;
  }

  peekTime(): number | undefined {
    return this.times[0];
  }

  push(time: number, item: T): void {
    let i = this.items.length;
    this.times.push(time);
    this.seqs.push(this.nextSeq++);
    this.items.push(item);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(i, parent)) break;
      this.swap(i, parent);
      i = parent;
    }
  }

  pop(): T | undefined {
    const n = this.items.length;
    if (n === 0) return undefined;
    const top = this.items[0];
    this.swap(0, n - 1);
    this.times.pop();
    this.seqs.pop();
    this.items.pop();
    let i = 0;
    const m = n - 1;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let best = i;
      if (l < m && this.less(l, best)) best = l;
      if (r < m && this.less(r, best)) best = r;
      if (best === i) break;
      this.swap(i, best);
      i = best;
    }
    return top;
  }

  private less(a: number, b: number): boolean {
    const ta = this.times[a]!;
    const tb = this.times[b]!;
    return ta < tb || (ta === tb && this.seqs[a]! < this.seqs[b]!);
  }

  private swap(a: number, b: number): void {
    [this.times[a], this.times[b]] = [this.times[b]!, this.times[a]!];
    [this.seqs[a], this.seqs[b]] = [this.seqs[b]!, this.seqs[a]!];
    [this.items[a], this.items[b]] = [this.items[b]!, this.items[a]!];
  }
}
