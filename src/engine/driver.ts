/**
 * Drives one EngineModel in real time: model time = real seconds since start × timeScale. One timer
 * for the whole engine, set for the end of the iteration in progress; each wake runs every
 * iteration that has ended by then (the model catches up), so a large timeScale costs a few timer
 * wakes, not one per iteration.
 */
import type { EngineModel } from './model.js';
import type { EngineEvent, EngineSequence } from './types.js';

export type FinishedEvent = Extract<EngineEvent, { type: 'finished' }>;

/** Who hears about one sequence. Calls are batched per wake: `progress` at most once per wake. */
export interface SequenceListener {
  /** `total` output tokens exist so far. */
  progress(total: number): void;
  /** All tokens exist (includes any not yet reported through `progress`). */
  finished(ev: FinishedEvent): void;
}

export class RealTimeDriver {
  private readonly t0 = performance.now();
  private readonly listeners = new Map<string, SequenceListener>();
  /** Latest token total per sequence during one wake; reused so a wake allocates little. */
  private readonly progressed = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  /** Model time the timer is set for. */
  private timerAt = Infinity;
  private stopped = false;

  constructor(
    readonly model: EngineModel,
    private readonly timeScale: number,
  ) {
    if (!(timeScale > 0 && Number.isFinite(timeScale))) throw new RangeError('timeScale must be > 0');
  }

  /** Current model time, seconds. */
  now(): number {
    return ((performance.now() - this.t0) / 1000) * this.timeScale;
  }

  submit(seq: EngineSequence, listener: SequenceListener): void {
    if (this.stopped) return;
    this.tick(); // bring the model up to now first, so the submit lands at the right time
    this.listeners.set(seq.id, listener);
    this.model.submit(seq, this.now());
    this.schedule();
  }

  /** Drop a sequence (client gone); frees its slot in the model. */
  cancel(id: string): void {
    if (!this.listeners.delete(id)) return;
    this.model.cancel(id, this.now());
    this.schedule();
  }

  /** Stop the timer and forget every listener; later submits are ignored. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    for (const id of this.listeners.keys()) this.model.cancel(id, this.now());
    this.listeners.clear();
  }

  private readonly wake = (): void => {
    this.timer = undefined;
    this.timerAt = Infinity;
    this.tick();
    this.schedule();
  };

  private tick(): void {
    const events = this.model.advance(this.now());
    if (events.length > 0) this.dispatch(events);
  }

  private schedule(): void {
    if (this.stopped) return;
    const next = this.model.nextEventTime();
    if (next === undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.timerAt = Infinity;
      return;
    }
    if (this.timer !== undefined && this.timerAt <= next) return; // fires in time; it reschedules
    clearTimeout(this.timer);
    const delayMs = (next / this.timeScale) * 1000 - (performance.now() - this.t0);
    this.timerAt = next;
    this.timer = setTimeout(this.wake, Math.max(1, delayMs));
  }

  private dispatch(events: readonly EngineEvent[]): void {
    const progressed = this.progressed;
    for (const e of events) {
      if (e.type === 'tokens') {
        progressed.set(e.id, e.total);
      } else if (e.type === 'finished') {
        progressed.delete(e.id);
        const l = this.listeners.get(e.id);
        if (l) {
          this.listeners.delete(e.id);
          l.finished(e);
        }
      }
    }
    for (const [id, total] of progressed) this.listeners.get(id)?.progress(total);
    progressed.clear();
  }
}
