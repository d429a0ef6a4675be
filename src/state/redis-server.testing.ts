/**
 * A private redis-server for tests that must kill, pause, restart or flush it (the shared one on
 * 6379 serves other tests). No persistence: a restart comes back empty, like a failover to a
 * fresh replica. Without the binary on PATH the tests fail loudly; they are never skipped.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';

/**
 * A port below the kernel's ephemeral range, free now. The server binds it after this returns and
 * again after every restart: an ephemeral port (listen on 0) could meanwhile become the local end of
 * some other test's outgoing connection (EADDRINUSE); ports below the range are never handed out so.
 */
async function freePort(): Promise<number> {
  let low = 32768;
  try {
    low =
      Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || low;
  } catch {
    // not Linux: the common default
  }
  const from = Math.max(1024, low - 12_000);
  for (let tries = 0; tries < 200; tries++) {
    const port = from + Math.floor(Math.random() * (low - from));
    const srv = createServer();
    const ok = await new Promise<boolean>((res) => {
      srv.once('error', () => res(false));
      srv.listen(port, '127.0.0.1', () => res(true));
    });
    if (ok) {
      await new Promise<void>((res) => srv.close(() => res()));
      return port;
    }
  }
  throw new Error(`no free port in ${from}-${low - 1}`);
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
