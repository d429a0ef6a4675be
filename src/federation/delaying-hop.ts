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
  /** Where new connections go; settable so a hop can exist before what it fronts listens. */
  target: number;
  /** Drop every connection through the hop and stop listening. */
  close(): Promise<void>;
}

/** Start a hop on 127.0.0.1 (ephemeral port) to 127.0.0.1:`target` delaying each way by `oneWayMs`. */
export async function startDelayingHop(target: number, oneWayMs: number): Promise<DelayingHop> {
  const sockets = new Set<Socket>();
  const hop = { port: 0, url: '', target, close: async (): Promise<void> => undefined };
  const server: Server = createServer((client) => {
    const upstream = connect(hop.target, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    }
    const pipe = (from: Socket, to: Socket): void => {
      from.on('data', (c: Buffer) => {
        setTimeout(() => to.destroyed || to.write(c), oneWayMs);
      });
      from.on('close', () => setTimeout(() => to.destroy(), oneWayMs));
      // A reset or refused upstream ends both sides (the close above follows).
      from.on('error', () => to.destroy());
    };
    pipe(client, upstream);
    pipe(upstream, client);
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
