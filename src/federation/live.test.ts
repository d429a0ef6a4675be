/**
 * Federation over real HTTP on loopback: two routers (the module's decision, status endpoint,
 * prober and forwarder on a plain HTTP server each), their emulated engines, and a TCP hop between
 * the regions that delays every chunk both ways (the cross-region latency).
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, connect, type Server as TcpServer, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { request } from 'undici';
import type { RequestInfo } from '../core/types.js';
import { defaultProfile, startEngine, type EngineServer } from '../engine/server.js';
import { Federation } from './federation.js';
import { forwardToPeer, type ForwardOutcome } from './forward.js';
import { PeerProber } from './prober.js';
import { handlePeerStatus } from './status-handler.js';
import { HOP_HEADER, PEER_STATUS_PATH } from './types.js';

const ONE_WAY_MS = 60;

/** A TCP hop to `port` that holds every chunk ONE_WAY_MS in each direction. */
async function delayingHop(port: number): Promise<{ port: number; server: TcpServer; sockets: Set<Socket> }> {
  const sockets = new Set<Socket>();
  const server = createTcpServer((client) => {
    const upstream = connect(port, '127.0.0.1');
    sockets.add(client).add(upstream);
    const pipe = (from: Socket, to: Socket): void => {
      from.on('data', (c) => setTimeout(() => to.destroyed || to.write(c), ONE_WAY_MS));
      from.on('close', () => setTimeout(() => to.destroy(), ONE_WAY_MS));
      from.on('error', () => to.destroy());
    };
    pipe(client, upstream);
    pipe(upstream, client);
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  return { port: (server.address() as { port: number }).port, server, sockets };
}

interface MiniRouter {
  readonly name: string;
  readonly server: Server;
  url: string;
  readonly federation: Federation;
  /** Whether its local replica counts as available (tests force "all full"). */
  localAvailable: boolean;
  readonly log: { id: string; hop: boolean; served: 'local' | string; outcome?: ForwardOutcome }[];
}

/** A router reduced to the federation path: decide, forward (or serve from its own engine). */
async function miniRouter(
  name: string,
  engine: EngineServer,
  peers: { name: string; url: string }[],
): Promise<MiniRouter> {
  const federation = new Federation({
    region: name,
    peers: peers.map((p) => ({ ...p, region: p.name })),
    selection: 'trie',
    ejectMs: 60_000,
  });
  const r: MiniRouter = { name, server: createServer(), url: '', federation, localAvailable: true, log: [] };
  const local = async (req: IncomingMessage, res: ServerResponse, body: Buffer): Promise<void> => {
    const up = await request(new URL(req.url!, engine.url), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    res.writeHead(up.statusCode, {
      'content-type': String(up.headers['content-type']),
      'x-llmlb-region': name,
    });
    for await (const c of up.body) res.write(c as Buffer);
    res.end();
  };
  r.server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (req.url === PEER_STATUS_PATH) {
      handlePeerStatus(req, res, () => ({
        region: name,
        availableReplicas: r.localAvailable ? 1 : 0,
        queueLength: 0,
      }));
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      (async () => {
        const body = Buffer.concat(chunks);
        const id = String(req.headers['x-test-id']);
        const hop = req.headers[HOP_HEADER] !== undefined;
        const info: RequestInfo = {
          id,
          model: 'm1',
          api: 'ollama',
          arrivedAt: Date.now(),
          promptText: body.toString(),
        };
        const d = federation.route(info, hop, r.localAvailable, Date.now());
        if (d.kind === 'peer') {
          federation.onForwarded(info, d.peer);
          const outcome = await forwardToPeer({
            url: d.url,
            method: 'POST',
            path: req.url!,
            headers: { 'content-type': 'application/json', 'x-test-id': id },
            body,
            res,
          });
          federation.onDone(d.peer, outcome === 'done', Date.now());
          r.log.push({ id, hop, served: d.peer, outcome });
          if (outcome !== 'failed-before-bytes') return;
        } else r.log.push({ id, hop, served: 'local' });
        // No byte went out: the request runs here after all.
        await local(req, res, body);
      })().catch((err: unknown) => res.destroy(err instanceof Error ? err : new Error(String(err))));
    });
  });
  await new Promise<void>((ok) => r.server.listen(0, '127.0.0.1', ok));
  r.url = `http://127.0.0.1:${(r.server.address() as { port: number }).port}`;
  return r;
}

const gen = (id: string, url: string, prompt: string) =>
  request(`${url}/api/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-test-id': id, 'x-llmlb-output-tokens': '8' },
    body: JSON.stringify({ model: 'm1', prompt, stream: true }),
  });

describe('federation live: two regions on loopback with a delaying hop', () => {
  let usEngine: EngineServer;
  let euEngine: EngineServer;
  let us: MiniRouter;
  let eu: MiniRouter;
  let hop: Awaited<ReturnType<typeof delayingHop>>;
  const profile = defaultProfile({
    slots: 4,
    baseStepS: 0.01,
    perSeqS: 0,
    perTokenS: 0,
    prefillPerTokenS: 0,
  });

  before(async () => {
    usEngine = await startEngine({ port: 0, api: 'ollama', models: ['m1'], profile, seed: 1, name: 'us-0' });
    euEngine = await startEngine({ port: 0, api: 'ollama', models: ['m1'], profile, seed: 2, name: 'eu-0' });
    // eu first, then the hop in front of it, then us with eu behind the hop as its peer.
    eu = await miniRouter('eu', euEngine, []);
    hop = await delayingHop(Number(new URL(eu.url).port));
    us = await miniRouter('us', usEngine, [{ name: 'eu', url: `http://127.0.0.1:${hop.port}` }]);
  });

  after(async () => {
    for (const s of hop.sockets) s.destroy();
    hop.server.close();
    us.server.closeAllConnections();
    eu.server.closeAllConnections();
    us.server.close();
    eu.server.close();
    await usEngine.close();
    await euEngine.close();
  });

  it('runs locally while a local replica is free', async () => {
    const r = await gen('l1', us.url, 'hello');
    assert.equal(r.headers['x-llmlb-region'], 'us');
    await r.body.text();
  });

  it('forwards across the hop when every local replica is full, streaming the answer back', async () => {
    us.localAvailable = false;
    await new PeerProber(us.federation, { intervalMs: 1000 }).probeOnce();
    assert.deepEqual(us.federation.available(Date.now()), ['eu']);
    const t0 = Date.now();
    const r = await gen('f1', us.url, 'a prompt that goes to europe');
    assert.equal(r.statusCode, 200);
    assert.equal(r.headers['x-llmlb-region'], 'eu');
    let chunks = 0;
    let text = '';
    for await (const c of r.body) {
      chunks++;
      text += (c as Buffer).toString();
    }
    const lines = text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { done: boolean });
    assert.ok(lines.length > 2 && lines.at(-1)!.done, 'NDJSON stream ends with done');
    assert.ok(chunks >= 2, `streamed in ${chunks} chunks`);
    assert.ok(Date.now() - t0 >= 2 * ONE_WAY_MS, 'paid the round trip');
    assert.deepEqual(eu.log.at(-1), { id: 'f1', hop: true, served: 'local' });
  });

  it('never forwards a forwarded request again (no loops)', async () => {
    // eu is full too and names us as a peer: a hop-marked request still stays in eu.
    const euWithPeer = await miniRouter('eu2', euEngine, [{ name: 'us', url: us.url }]);
    euWithPeer.localAvailable = false;
    euWithPeer.federation.setStatus('us', { region: 'us', availableReplicas: 5, queueLength: 0 }, Date.now());
    const r = await request(`${euWithPeer.url}/api/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-test-id': 'h1', [HOP_HEADER]: '1' },
      body: JSON.stringify({ model: 'm1', prompt: 'x', stream: false }),
    });
    await r.body.text();
    assert.deepEqual(euWithPeer.log, [{ id: 'h1', hop: true, served: 'local' }]);
    // Without the marker it would have gone to us.
    const r2 = await gen('h2', euWithPeer.url, 'y');
    await r2.body.text();
    assert.equal(euWithPeer.log.at(-1)!.served, 'us');
    euWithPeer.server.closeAllConnections();
    euWithPeer.server.close();
  });

  it('a peer that fails mid-stream cuts the answer; the peer is ejected', async () => {
    const broken = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.write('{"response":"par');
      setTimeout(() => res.destroy(), 30);
    });
    await new Promise<void>((ok) => broken.listen(0, '127.0.0.1', ok));
    const url = `http://127.0.0.1:${(broken.address() as { port: number }).port}`;
    const mid = await miniRouter('mid', usEngine, [{ name: 'bad', url }]);
    mid.localAvailable = false;
    mid.federation.setStatus('bad', { region: 'bad', availableReplicas: 1, queueLength: 0 }, Date.now());
    const r = await gen('m1', mid.url, 'z');
    await assert.rejects(r.body.text());
    await new Promise((ok) => setTimeout(ok, 20));
    assert.equal(mid.log.at(-1)!.outcome, 'failed-mid-stream');
    assert.equal(mid.federation.isAvailable('bad', Date.now()), false);
    mid.server.closeAllConnections();
    mid.server.close();
    broken.close();
  });

  it('a peer that is down: retried locally (no byte had gone out), then skipped', async () => {
    for (const s of hop.sockets) s.destroy();
    eu.server.closeAllConnections();
    await new Promise<void>((ok) => eu.server.close(() => ok()));
    us.federation.setStatus('eu', { region: 'eu', availableReplicas: 1, queueLength: 0 }, Date.now());
    const r = await gen('d1', us.url, 'to a dead peer');
    assert.equal(r.statusCode, 200);
    assert.equal(r.headers['x-llmlb-region'], 'us');
    await r.body.text();
    assert.equal(us.log.at(-1)!.outcome, 'failed-before-bytes');
    // The prober now fails too, and the request is not even tried there.
    await new PeerProber(us.federation, { intervalMs: 1000, timeoutMs: 300 }).probeOnce();
    assert.deepEqual(
      us.federation.route(
        { id: 'd2', model: 'm1', api: 'ollama', arrivedAt: 0, promptText: 'q' },
        false,
        false,
        Date.now(),
      ),
      { kind: 'local' },
    );
  });
});
