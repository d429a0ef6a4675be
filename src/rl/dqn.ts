import { Mlp, type MlpJson } from './mlp.js';

/**
 * Double DQN (van Hasselt et al. 2016), as the performance-aware router §4.3 / C.10.3 trains its router: an online
 * Q-network picks the next action, a periodically synced target network values it, transitions
 * are replayed from a ring buffer in seeded random minibatches, and the loss is Huber on the
 * chosen action's Q. Deterministic under the seed.
 */
export interface Transition {
  readonly s: Float64Array;
  readonly a: number;
  readonly r: number;
  /** undefined: terminal. */
  readonly s2: Float64Array | undefined;
  /** Discount to apply to s2's value (γ, or the seed's guided γ̃ during training). */
  readonly gamma: number;
}

export class ReplayBuffer<T = Transition> {
  private readonly items: T[] = [];
  private next = 0;
  constructor(readonly capacity: number) {}
  get size(): number {
    return this.items.length;
  }
  push(t: T): void {
    if (this.items.length < this.capacity) this.items.push(t);
    else this.items[this.next] = t;
    this.next = (this.next + 1) % this.capacity;
  }
  sample(n: number, random: () => number): T[] {
    const out: T[] = [];
    for (let i = 0; i < n; i++) out.push(this.items[Math.floor(random() * this.items.length)]!);
    return out;
  }
}

export interface DqnOptions {
  readonly sizes: readonly number[];
  readonly lr?: number;
  readonly batch?: number;
  readonly bufferSize?: number;
  /** Gradient steps between target-network syncs. */
  readonly targetEvery?: number;
}

/**
 * What both layouts share: the online and target networks, the replay buffer, and the minibatch
 * step (Huber loss on Q(s, a) against its Double-DQN target, one Adam step, a target sync every
 * `targetEvery` steps). A layout says how Q(s, a) and the target are computed.
 */
abstract class DqnCore<T> {
  readonly online: Mlp;
  readonly target: Mlp;
  readonly buffer: ReplayBuffer<T>;
  /** Gradient of the loss on the network's outputs (one Q per action, or the one score). */
  protected readonly dOut: Float64Array;
  private readonly lr: number;
  private readonly batch: number;
  private readonly targetEvery: number;
  private steps = 0;

  constructor(
    opts: DqnOptions,
    protected readonly random: () => number,
  ) {
    this.online = new Mlp(opts.sizes, random);
    this.target = new Mlp(opts.sizes, random);
    this.target.copyFrom(this.online);
    this.buffer = new ReplayBuffer<T>(opts.bufferSize ?? 50000);
    this.lr = opts.lr ?? 1e-3;
    this.batch = opts.batch ?? 512;
    this.targetEvery = opts.targetEvery ?? 200;
    this.dOut = new Float64Array(opts.sizes[opts.sizes.length - 1]!);
  }

  /** Double-DQN target of one transition. */
  abstract targetOf(t: T): number;

  /** Q_online(s, a) of the transition (the forward pass the backward pass then follows). */
  protected abstract qOf(t: T): number;

  /** The network output that Q(s, a) is. */
  protected abstract outputOf(t: T): number;

  /** One minibatch gradient step (Huber loss); returns the mean loss, or NaN when the buffer is short. */
  learn(): number {
    if (this.buffer.size < Math.min(this.batch, 64)) return NaN;
    const batch = this.buffer.sample(this.batch, this.random);
    let loss = 0;
    for (const t of batch) {
      const y = this.targetOf(t);
      const err = this.qOf(t) - y;
      loss += Math.abs(err) <= 1 ? 0.5 * err * err : Math.abs(err) - 0.5;
      this.dOut.fill(0);
      this.dOut[this.outputOf(t)] = Math.max(-1, Math.min(1, err)); // Huber gradient
      this.online.backward(this.dOut);
    }
    this.online.adam(this.lr, 1 / batch.length);
    if (++this.steps % this.targetEvery === 0) this.target.copyFrom(this.online);
    return loss / batch.length;
  }

  toJSON(): MlpJson {
    return this.online.toJSON();
  }
}

export class DoubleDqn extends DqnCore<Transition> {
  get actions(): number {
    return this.dOut.length;
  }

  /** argmax_a Q(s, a) over allowed actions (all when `allowed` is undefined); ties: lowest. */
  greedy(s: ArrayLike<number>, allowed?: (a: number) => boolean): number {
    const q = this.online.forward(s);
    let best = -1;
    for (let a = 0; a < q.length; a++)
      if ((allowed === undefined || allowed(a)) && (best < 0 || q[a]! > q[best]!)) best = a;
    return Math.max(0, best);
  }

  /** ε-greedy with the seeded generator. */
  act(s: ArrayLike<number>, epsilon: number, allowed?: (a: number) => boolean): number {
    if (this.random() < epsilon) {
      const n = this.actions;
      for (let tries = 0; tries < 4 * n; tries++) {
        const a = Math.floor(this.random() * n);
        if (allowed === undefined || allowed(a)) return a;
      }
    }
    return this.greedy(s, allowed);
  }

  /** Double-DQN target for one transition: r + γ · Q_target(s2, argmax_a Q_online(s2, a)). */
  targetOf(t: Transition): number {
    if (t.s2 === undefined) return t.r;
    const a2 = this.greedy(t.s2);
    return t.r + t.gamma * this.target.forward(t.s2)[a2]!;
  }

  protected qOf(t: Transition): number {
    return this.online.forward(t.s)[t.a]!;
  }

  protected outputOf(t: Transition): number {
    return t.a;
  }
}

/**
 * A transition of the shared-head DQN: the state is `n` option rows (one per action) of the
 * network's input size, packed; the action is a row index.
 */
export interface RowTransition {
  readonly s: Float64Array;
  readonly a: number;
  readonly r: number;
  /** undefined: terminal. */
  readonly s2: Float64Array | undefined;
  readonly gamma: number;
}

/**
 * Double DQN over a shared per-option head: Q(s, a) = net(row_a(s)), one network scoring every
 * option from its own row (the performance-aware router's router with permutation-equivariant backend scores). The
 * options of a state are its rows; the rows count may differ between states (candidates come and
 * go, "wait" is offered only sometimes). Same loss, target and replay as DoubleDqn.
 */
export class SharedHeadDqn extends DqnCore<RowTransition> {
  readonly width: number;

  constructor(opts: DqnOptions, random: () => number) {
    if (opts.sizes[opts.sizes.length - 1] !== 1) throw new RangeError('shared head: output size must be 1');
    super(opts, random);
    this.width = opts.sizes[0]!;
  }

  /** argmax over the `rows.length / width` options of `net`'s score; ties: lowest. */
  private argmax(net: Mlp, rows: Float64Array): number {
    const n = rows.length / this.width;
    let best = 0;
    let v = -Infinity;
    for (let i = 0; i < n; i++) {
      const q = net.forwardAt(rows, i * this.width)[0]!;
      if (q > v) {
        v = q;
        best = i;
      }
    }
    return best;
  }

  greedy(rows: Float64Array): number {
    return this.argmax(this.online, rows);
  }

  /** ε-greedy over the options with the seeded generator. */
  act(rows: Float64Array, epsilon: number): number {
    if (this.random() < epsilon) return Math.floor(this.random() * (rows.length / this.width));
    return this.greedy(rows);
  }

  /** Double-DQN target: r + γ · Q_target(s2, argmax_a Q_online(s2, a)). */
  targetOf(t: RowTransition): number {
    if (t.s2 === undefined || t.s2.length === 0) return t.r;
    const a2 = this.argmax(this.online, t.s2);
    return t.r + t.gamma * this.target.forwardAt(t.s2, a2 * this.width)[0]!;
  }

  protected qOf(t: RowTransition): number {
    return this.online.forwardAt(t.s, t.a * this.width)[0]!;
  }

  protected outputOf(): number {
    return 0;
  }
}
