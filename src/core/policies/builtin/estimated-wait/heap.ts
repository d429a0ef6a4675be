/**
 * A min-heap of numbers in the first `n` cells of a reused Float64Array (the wait model's times at
 * which each slot frees: no allocation per estimate).
 */

/** Adds `v` to the min-heap in h[0, n). */
export function heapPush(h: Float64Array, n: number, v: number): void {
  let i = n;
  while (i > 0) {
    const p = (i - 1) >> 1;
    if (h[p]! <= v) break;
    h[i] = h[p]!;
    i = p;
  }
  h[i] = v;
}

/** Replace the minimum of the min-heap in h[0, n) with `v` and restore the heap. */
export function heapReplaceTop(h: Float64Array, n: number, v: number): void {
  let i = 0;
  for (;;) {
    const l = 2 * i + 1;
    if (l >= n) break;
    const r = l + 1;
    const c = r < n && h[r]! < h[l]! ? r : l;
    if (h[c]! >= v) break;
    h[i] = h[c]!;
    i = c;
  }
  h[i] = v;
}
