/**
 * Rolling one-minute budget (tokens and requests), kept as per-tick slots.
 *
 * Why not a plain token bucket: a bucket of capacity C refilling C per minute admits up to 2·C in
 * the minute after an idle spell (full bucket + refill), which is a target violation for anyone
 * measuring per-minute traffic. Here a tick's admissions count until the whole tick has left the
 * last 60 s, so no 60 s window ever holds more than the cap; capacity comes back at tick
 * boundaries, which are the "refill ticks" that wait hints align to. Conservative by < one tick.
 */
export const WINDOW_MS = 60_000;

/** What was admitted during [start, start + tickMs). JSON-safe (shared state stores it as is). */
export interface WindowSlot {
  start: number;
  tokens: number;
  requests: number;
}

export function tickStart(now: number, tickMs: number): number {
  return Math.floor(now / tickMs) * tickMs;
}

/** When a slot's admissions stop counting. */
export function slotExpiry(slot: WindowSlot, tickMs: number): number {
  return slot.start + tickMs + WINDOW_MS;
}

/** Drop slots that no longer count at `now` (slots are kept oldest first). */
export function pruneWindow(slots: WindowSlot[], now: number, tickMs: number): void {
  let i = 0;
  while (i < slots.length && slotExpiry(slots[i]!, tickMs) <= now) i++;
  if (i > 0) slots.splice(0, i);
}

export function windowUsage(slots: readonly WindowSlot[]): { tokens: number; requests: number } {
  let tokens = 0;
  let requests = 0;
  for (const s of slots) {
    tokens += s.tokens;
    requests += s.requests;
  }
  return { tokens, requests };
}

/** Record one admission of `tokens`; returns the slot start (kept on the lease for refunds). */
export function recordAdmission(slots: WindowSlot[], now: number, tickMs: number, tokens: number): number {
  const start = tickStart(now, tickMs);
  const last = slots[slots.length - 1];
  if (last && last.start === start) {
    last.tokens += tokens;
    last.requests += 1;
  } else if (last && last.start > start) {
    // `now` went backwards (another replica's clock): charge the newest slot, never an older one,
    // so the charge can't expire earlier than it should.
    last.tokens += tokens;
    last.requests += 1;
    return last.start;
  } else {
    slots.push({ start, tokens, requests: 1 });
  }
  return start;
}

/** Give back tokens charged at slot `start` (if it still counts). Requests stay charged. */
export function refundTokens(slots: WindowSlot[], start: number, tokens: number): void {
  const s = slots.find((x) => x.start === start);
  if (s) s.tokens = Math.max(0, s.tokens - tokens);
}

/**
 * Milliseconds from `now` until `used(kind) + need ≤ cap`, as slots expire; 0 if it fits now;
 * Infinity if it never can (need > cap). `kind` picks tokens or requests.
 */
export function msUntilFits(
  slots: readonly WindowSlot[],
  kind: 'tokens' | 'requests',
  need: number,
  cap: number,
  now: number,
  tickMs: number,
): number {
  if (need > cap) return Infinity;
  let used = 0;
  for (const s of slots) used += s[kind];
  if (used + need <= cap) return 0;
  for (const s of slots) {
    used -= s[kind];
    if (used + need <= cap) return Math.max(0, slotExpiry(s, tickMs) - now);
  }
  return 0; // unreachable: with every slot gone, used = 0 and need ≤ cap
}
