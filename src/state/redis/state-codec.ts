/**
 * The quota state as Redis holds it: one JSON document, its window slots as flat number arrays.
 */
import type { QuotaState, WindowSlot } from '../../core/quota/index.js';

/**
 * The state document is read and written whole on every decision, and a busy model keeps up to
 * 60 s / tickMs window slots: store them as flat number arrays, about a third of the size of
 * {start, tokens, requests} objects.
 */
export function encodeState(state: QuotaState): string {
  return JSON.stringify(state, (key, value: unknown) =>
    key === 'slots' ? (value as WindowSlot[]).flatMap((x) => [x.start, x.tokens, x.requests]) : value,
  );
}

export function decodeState(json: string): QuotaState {
  const parsed = JSON.parse(json) as QuotaState;
  // Null prototype like the core's own states: a model named 'constructor' or '__proto__' is
  // just a key (assigning onto a null-prototype object defines, it can't reach a prototype).
  const state: QuotaState = {
    ...parsed,
    models: Object.assign(Object.create(null) as QuotaState['models'], parsed.models),
  };
  for (const m of Object.values(state.models)) {
    const flat = m.slots as unknown as number[];
    const slots: WindowSlot[] = [];
    for (let i = 0; i + 2 < flat.length; i += 3)
      slots.push({ start: flat[i]!, tokens: flat[i + 1]!, requests: flat[i + 2]! });
    m.slots = slots;
  }
  return state;
}

/** Whether an age-bonus hold opened, grew or went since `before` (the state's JSON then). */
export function holdsChanged(before: string, state: QuotaState): boolean {
  const b = JSON.parse(before) as QuotaState;
  for (const [k, m] of Object.entries(state.models)) {
    const was = Object.hasOwn(b.models, k) ? b.models[k]!.hold : null;
    if (JSON.stringify(was) !== JSON.stringify(m.hold)) return true;
  }
  return false;
}
