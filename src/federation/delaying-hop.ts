/**
 * A TCP hop that holds every chunk `oneWayMs` in each direction: cross-region latency between
 * routers on one machine (the federation tests, `bench:federation`, `llmlb demo --regions 3`).
 * Chunks leave in the order they came (Node runs timers of one duration first in, first out), and
 * a side that closes closes the other one way later, so HTTP keep-alive and streaming work across it.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export interface DelayingHop {
  /** The port the hop listens on (127.0.0.1). */
  readonly port: number;
  readonly url: string;
  /**
   * Where new connections go; settable so a hop can exist before what it fronts listens. While it
   * is 0, connections wait (paused) and go there once it is set.
   */
  target: number;
  /** Drop every connection through the hop and stop listening. */
  close(): Promise<void>;
}

/** Start a hop on 127.0.0.1 (ephemeral port) to 127.0.0.1:`target` delaying each way by `oneWayMs`. */
export async function startDelayingHop(target: number, oneWayMs: number): Promise<DelayingHop> {
  const sockets = new Set<Socket>();
  const waiting: Socket[] = [];
  let to = target;
  const hop = {
    port: 0,
    url: '',
    get target(): number {
      return to;
    },
    set target(port: number) {
      to = port;
      if (port !== 0) for (const c of waiting.splice(0)) if (!c.destroyed) join(c);
    },
    close: async (): Promise<void> => undefined,
  };
  const join = (client: Socket): void => {
    const upstream = connect(to, '127.0.0.1');
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    const pipe = (from: Socket, dst: Socket): void => {
      from.on('data', (c: Buffer) => {
        setTimeout(() => dst.destroyed || dst.write(c), oneWayMs);
      });
      from.on('close', () => setTimeout(() => dst.destroy(), oneWayMs));
      // A reset or refused upstream ends both sides (the close above follows).
      from.on('error', () => dst.destroy());
    };
    pipe(client, upstream);
    pipe(upstream, client);
    client.resume();
  };
  const server: Server = createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => client.destroy());
    // Held until the hop knows where to go; its bytes wait in the socket meanwhile.
    client.pause();
    if (to === 0) waiting.push(client);
    else join(client);
  });
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', fail);
      ok();
    });
  });
  hop.port = (server.address() as { port: number }).port;
  hop.url = `http://127.0.0.1:${hop.port}`;
  hop.close = () =>
    new Promise<void>((ok) => {
      for (const s of sockets) s.destroy();
      server.close(() => ok());
    });
  return hop;
}
