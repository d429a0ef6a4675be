/**
 * A private redis-server for tests that must kill, pause, restart or flush it (the shared one on
 * 6379 serves other tests). No persistence: a restart comes back empty, like a failover to a
 * fresh replica. Without the binary on PATH the tests fail loudly; they are never skipped.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((res) => srv.listen(0, '127.0.0.1', res));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((res) => srv.close(() => res()));
  return port;
}

export class RedisServer {
  #proc: ChildProcess | undefined;
  private constructor(readonly port: number) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}/0`;
  }

  static async start(): Promise<RedisServer> {
    const s = new RedisServer(await freePort());
    await s.restart();
    return s;
  }

  /** Start (again) on the same port, empty, and wait until it answers PING. */
  async restart(): Promise<void> {
    if (this.#proc) await this.kill();
    const proc = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      { stdio: 'ignore' },
    );
    this.#proc = proc;
    const spawned = new Promise<void>((res, rej) => {
      proc.once('spawn', res);
      proc.once('error', (err) =>
        rej(new Error(`redis-server could not be started (is it on PATH?): ${err.message}`)),
      );
    });
    await spawned;
    const deadline = Date.now() + 5000;
    for (;;) {
      const r = new Redis(this.url, {
        lazyConnect: true,
        retryStrategy: () => null,
        maxRetriesPerRequest: 0,
      });
      r.on('error', () => undefined);
      try {
        await r.connect();
        await r.ping();
        return;
      } catch (err) {
        if (Date.now() > deadline)
          throw new Error(`redis-server on ${this.port} never answered: ${String(err)}`);
        await new Promise((res) => setTimeout(res, 25));
      } finally {
        r.disconnect();
      }
    }
  }

  /** kill -9: the server is gone, connections drop. */
  async kill(): Promise<void> {
    const p = this.#proc;
    this.#proc = undefined;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const gone = new Promise((res) => p.once('exit', res));
    p.kill('SIGKILL');
    await gone;
  }

  /** SIGSTOP / SIGCONT: connections stay open, nothing answers (a hung server). */
  pause(): void {
    this.#proc?.kill('SIGSTOP');
  }
  resume(): void {
    this.#proc?.kill('SIGCONT');
  }

  /** A command on a fresh connection (FLUSHALL, DUMP/RESTORE, raw reads). */
  async run<T>(fn: (r: Redis) => Promise<T>): Promise<T> {
    const r = new Redis(this.url, { lazyConnect: true });
    await r.connect();
    try {
      return await fn(r);
    } finally {
      r.disconnect();
    }
  }

  async flushAll(): Promise<void> {
    await this.run((r) => r.flushall());
  }
}
