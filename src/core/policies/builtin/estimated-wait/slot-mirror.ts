/**
 * The router's picture of engines whose prompt cache is their slots (llama.cpp's server, which says
 * so in /props: EngineCacheInfo.slots). Each slot keeps only the last prompt it ran and shares
 * nothing; a request takes the free slot whose kept prompt shares the longest prefix with it (the
 * least recently used on a tie) and waits FIFO while all are busy. The learned record
 * (cached-prefix.ts) cannot say this: it credits whatever fits its size, however many prompts that
 * is, and a prompt beside a running read of itself (issue #30, live: 9 of 46 requests credited with
 * an evicted document, 5 sent beside a running read of theirs).
 *
 * Built from this router's pushes and answers only: another router's requests, or a slot count that
 * changes, make it a guess, no worse than the record's.
 */

interface Slot {
  /** The prompt it keeps (the last it ran or runs). */
  text: string;
  /** The request running in it ('' when free). */
  busy: string;
  /** When it was last freed (a counter; lower is older). */
  lastUsed: number;
  /**
   * The common prefix of its prompt with each other slot's (any engine; absent: 0), updated when a
   * slot's prompt changes: evictedChars asks it per candidate per pick, and comparing every slot's
   * 100k-token prompt with every other's there cost candidates × slots scans a pick.
   */
  readonly shared: Map<Slot, number>;
}

interface Engine {
  readonly slots: Slot[];
  /** Pushed while every slot was busy, oldest first. */
  readonly waiting: { id: string; text: string }[];
  clock: number;
}

export class SlotMirror {
  private readonly engines = new Map<string, Engine>();

  /**
   * `chunk`: a slot's prompt counts as shared with a request only in whole runs of this many
   * characters (the router's chunk): llama.cpp, like the simulator's block match, picks the least
   * recently used free slot for a prompt that shares a few characters ("Document ") with every kept
   * one, not the slot of the last document sent.
   */
  constructor(private readonly chunk = 1) {}

  /** evictedChars of the last look(). */
  evicted = 0;

  /**
   * Characters of `text` that `backend` would find cached if it went there now: the longest
   * common prefix with a free slot's prompt (llama.cpp runs it at once in a free slot: a busy
   * slot's prompt, even its own, is no use to it); while every slot is busy or requests wait, with
   * any slot's (it waits, and may get the one that holds it). Sets `evicted` (evictedChars) in the
   * same pass: each slot's prompt is compared with `text` once, for both.
   */
  look(backend: string, text: string): number {
    this.evicted = 0;
    const e = this.engines.get(backend);
    if (e === undefined) return 0;
    if (e.waiting.length > 0 || !e.slots.some((s) => s.busy === '')) {
      let cached = 0;
      for (const s of e.slots) cached = Math.max(cached, commonPrefix(s.text, text));
      return cached;
    }
    const taken = freeSlotFor(e, text, this.chunk)!;
    if (taken.text !== '') {
      let kept = found.shared;
      for (const n of taken.shared.values()) if (n > kept) kept = n;
      const lost = taken.text.length - kept;
      this.evicted = lost - (lost % this.chunk);
    }
    return found.longest;
  }

  /** look()'s cached characters alone. */
  cachedChars(backend: string, text: string): number {
    return this.look(backend, text);
  }

  /** Request `id` of prompt `text` was pushed to `backend`, an engine of `slots` slot caches. */
  push(backend: string, slots: number, id: string, text: string): void {
    let e = this.engines.get(backend);
    if (e === undefined || e.slots.length !== slots) {
      if (e !== undefined) this.forget(e);
      e = {
        slots: Array.from({ length: slots }, () => ({ text: '', busy: '', lastUsed: 0, shared: new Map() })),
        waiting: [],
        clock: 0,
      };
      this.engines.set(backend, e);
    }
    if (e.waiting.length > 0 || !this.place(e, id, text)) e.waiting.push({ id, text });
  }

  /** Run `id` in the free slot llama.cpp would pick; false when none is free. */
  private place(e: Engine, id: string, text: string): boolean {
    const best = freeSlotFor(e, text, this.chunk);
    if (best === undefined) return false;
    best.busy = id;
    if (best.text !== text) {
      best.text = text;
      for (const other of this.engines.values())
        for (const o of other.slots) {
          if (o === best) continue;
          const n = commonPrefix(text, o.text);
          if (n > 0) {
            best.shared.set(o, n);
            o.shared.set(best, n);
          } else {
            best.shared.delete(o);
            o.shared.delete(best);
          }
        }
    }
    return true;
  }

  /** An engine's slots leave: the others forget what they shared with them. */
  private forget(e: Engine): void {
    for (const s of e.slots) for (const o of s.shared.keys()) o.shared.delete(s);
  }

  /**
   * Characters of another prompt that sending `text` to `backend` now would drop from every slot
   * this router knows of (issue #30, slot placement): the free slot llama.cpp would run it in keeps
   * a prompt no other slot, on any engine, holds as far — that part is gone, and its next read
   * prefills it whole. In whole chunks. 0 where it would wait (the slot it gets is not known yet),
   * or the slot it takes is empty or holds only what the request itself reuses.
   */
  evictedChars(backend: string, text: string): number {
    this.look(backend, text);
    return this.evicted;
  }

  /** Request `id` ended at `backend` (answered, failed or cancelled): its slot is free for the next. */
  finish(backend: string, id: string): void {
    const e = this.engines.get(backend);
    if (e === undefined) return;
    const s = e.slots.find((x) => x.busy === id);
    if (s === undefined) {
      const w = e.waiting.findIndex((x) => x.id === id);
      if (w >= 0) e.waiting.splice(w, 1);
      return;
    }
    s.busy = '';
    s.lastUsed = ++e.clock;
    while (e.waiting.length > 0 && this.place(e, e.waiting[0]!.id, e.waiting[0]!.text)) e.waiting.shift();
  }

  removeBackend(name: string): void {
    const e = this.engines.get(name);
    if (e !== undefined) this.forget(e);
    this.engines.delete(name);
  }
}

/** freeSlotFor's by-products: the chosen slot's common prefix with the text, and the longest over free slots. */
const found = { shared: 0, longest: 0 };

/**
 * The free slot llama.cpp would run `text` in (shared prefix in whole `chunk`s, then LRU); sets
 * `found` (each free slot's prompt compared once, for the choice and for SlotMirror.look).
 */
function freeSlotFor(e: Engine, text: string, chunk: number): Slot | undefined {
  let best: Slot | undefined;
  let bestLen = -1;
  found.shared = 0;
  found.longest = 0;
  for (const s of e.slots) {
    if (s.busy !== '') continue;
    const shared = commonPrefix(s.text, text);
    if (shared > found.longest) found.longest = shared;
    const n = shared - (shared % chunk);
    if (n > bestLen || (n === bestLen && s.lastUsed < best!.lastUsed)) {
      best = s;
      bestLen = n;
      found.shared = shared;
    }
  }
  return best;
}

function commonPrefix(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}
