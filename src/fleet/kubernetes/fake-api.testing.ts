import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A fake Kubernetes API server for tests (real HTTP): list and watch of pods, InferencePools
 * and InferenceObjectives (llm-d.ai/v1alpha2) in one namespace, as the API server does them — lists carry a resourceVersion,
 * a watch from it streams JSON lines (chunked) and stays open; a watch from a compacted version
 * gets 410 Gone. Tests change objects and see the events go out; they can end every open watch,
 * compact the history, or fail the next lists.
 */

type Obj = {
  metadata: { name: string; namespace?: string; resourceVersion?: string; labels?: Record<string, string> };
} & Record<string, unknown>;
type Kind = 'pods' | 'inferencepools' | 'inferenceobjectives';
interface Event {
  readonly rv: number;
  readonly kind: Kind;
  readonly type: 'ADDED' | 'MODIFIED' | 'DELETED';
  readonly object: Obj;
}
interface Watcher {
  readonly kind: Kind;
  readonly match: (o: Obj) => boolean;
  readonly res: ServerResponse;
}

export interface Request {
  readonly kind: Kind;
  readonly watch: boolean;
  readonly query: string;
  readonly auth: string | undefined;
}

export class FakeKubeApi {
  readonly namespace: string;
  private server: Server | undefined;
  private rv = 100;
  private compactedAt = 0;
  private readonly objects: Record<Kind, Map<string, Obj>> = {
    pods: new Map(),
    inferencepools: new Map(),
    inferenceobjectives: new Map(),
  };
  private readonly events: Event[] = [];
  private readonly watchers = new Set<Watcher>();
  /** Every request, in order (tests count lists and watches). */
  readonly requests: Request[] = [];
  /** The next lists answer this status instead (then normal again). */
  private failLists = 0;
  /** How a too-old watch is refused: an HTTP 410, or a 200 stream with an ERROR event (both happen). */
  goneAs: 'status' | 'event' = 'status';
  url = '';

  constructor(namespace = 'ns') {
    this.namespace = namespace;
  }

  async start(): Promise<string> {
    this.server = createServer((req, res) => this.handle(req, res));
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.url;
  }

  async close(): Promise<void> {
    this.endWatches();
    this.server?.closeAllConnections();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }

  lists(kind: Kind): number {
    return this.requests.filter((r) => r.kind === kind && !r.watch).length;
  }

  watches(kind: Kind): number {
    return this.requests.filter((r) => r.kind === kind && r.watch).length;
  }

  openWatches(kind: Kind): number {
    return [...this.watchers].filter((w) => w.kind === kind).length;
  }

  /** Ends every open watch stream (the server's own timeout does this in a real cluster). */
  endWatches(): void {
    for (const w of this.watchers) w.res.end();
    this.watchers.clear();
  }

  /** Forgets history: a watch from any version seen so far gets 410 Gone. */
  compact(): void {
    this.compactedAt = this.rv;
  }

  failNextLists(n: number): void {
    this.failLists = n;
  }

  setPool(name: string, matchLabels: Record<string, string>, port: number | number[]): void {
    this.put('inferencepools', {
      apiVersion: 'inference.networking.k8s.io/v1',
      kind: 'InferencePool',
      metadata: { name, namespace: this.namespace },
      spec: {
        selector: { matchLabels },
        targetPorts: (Array.isArray(port) ? port : [port]).map((number) => ({ number })),
        endpointPickerRef: { name: `${name}-epp`, kind: 'Service', port: { number: 9002 } },
      },
    });
  }

  /** An InferenceObjective (llm-d.ai/v1alpha2); `priority` undefined leaves spec.priority out. */
  setObjective(
    name: string,
    poolRef: { name: string; group?: string; kind?: string },
    priority: number | undefined,
  ): void {
    this.put('inferenceobjectives', {
      apiVersion: 'llm-d.ai/v1alpha2',
      kind: 'InferenceObjective',
      metadata: { name, namespace: this.namespace },
      spec: { poolRef, ...(priority !== undefined ? { priority } : {}) },
    });
  }

  setPod(
    name: string,
    labels: Record<string, string>,
    ip: string | undefined,
    ready: boolean,
    extra: { deletionTimestamp?: string } = {},
  ): void {
    this.put('pods', {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: this.namespace, labels, ...extra },
      spec: { containers: [{ name: 'vllm', image: 'vllm/vllm-openai' }] },
      status: {
        phase: 'Running',
        ...(ip !== undefined ? { podIP: ip } : {}),
        conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }],
      },
    });
  }

  delete(kind: Kind, name: string): void {
    const o = this.objects[kind].get(name);
    if (!o) return;
    this.objects[kind].delete(name);
    this.emit(kind, 'DELETED', { ...o, metadata: { ...o.metadata, resourceVersion: String(++this.rv) } });
  }

  private put(kind: Kind, o: Obj): void {
    const type = this.objects[kind].has(o.metadata.name) ? 'MODIFIED' : 'ADDED';
    const obj = { ...o, metadata: { ...o.metadata, resourceVersion: String(++this.rv) } };
    this.objects[kind].set(o.metadata.name, obj);
    this.emit(kind, type, obj);
  }

  private emit(kind: Kind, type: Event['type'], object: Obj): void {
    const ev = { rv: this.rv, kind, type, object };
    this.events.push(ev);
    for (const w of this.watchers) if (w.kind === kind && w.match(object)) this.send(w.res, ev);
  }

  private send(res: ServerResponse, ev: Event): void {
    res.write(`${JSON.stringify({ type: ev.type, object: ev.object })}\n`);
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const u = new URL(req.url ?? '/', 'http://x');
    const ns = this.namespace;
    const kind: Kind | undefined =
      u.pathname === `/api/v1/namespaces/${ns}/pods`
        ? 'pods'
        : u.pathname === `/apis/inference.networking.k8s.io/v1/namespaces/${ns}/inferencepools`
          ? 'inferencepools'
          : u.pathname === `/apis/llm-d.ai/v1alpha2/namespaces/${ns}/inferenceobjectives`
            ? 'inferenceobjectives'
            : undefined;
    const watch = u.searchParams.get('watch') === 'true';
    if (!kind) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"kind":"Status","code":404}');
      return;
    }
    this.requests.push({ kind, watch, query: u.search, auth: req.headers.authorization });
    const match = matcher(u.searchParams.get('labelSelector'), u.searchParams.get('fieldSelector'));
    if (!watch) {
      if (this.failLists > 0) {
        this.failLists--;
        res.writeHead(500, { 'content-type': 'application/json' }).end('{"kind":"Status","code":500}');
        return;
      }
      const items = [...this.objects[kind].values()].filter(match);
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          apiVersion: LIST_TYPE[kind][0],
          kind: LIST_TYPE[kind][1],
          metadata: { resourceVersion: String(this.rv) },
          items,
        }),
      );
      return;
    }
    const from = Number(u.searchParams.get('resourceVersion') ?? '0');
    if (from < this.compactedAt) {
      const status = { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Expired', code: 410 };
      if (this.goneAs === 'status') {
        res.writeHead(410, { 'content-type': 'application/json' }).end(JSON.stringify(status));
      } else {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(`${JSON.stringify({ type: 'ERROR', object: status })}\n`);
      }
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    res.flushHeaders();
    for (const ev of this.events)
      if (ev.kind === kind && ev.rv > from && match(ev.object)) this.send(res, ev);
    const w: Watcher = { kind, match, res };
    this.watchers.add(w);
    res.on('close', () => this.watchers.delete(w));
  }
}

const LIST_TYPE: Record<Kind, readonly [string, string]> = {
  pods: ['v1', 'PodList'],
  inferencepools: ['inference.networking.k8s.io/v1', 'InferencePoolList'],
  inferenceobjectives: ['llm-d.ai/v1alpha2', 'InferenceObjectiveList'],
};

/** `a=b,c=d` label selectors and `metadata.name=x` field selectors, as the fake understands them. */
function matcher(labels: string | null, fields: string | null): (o: Obj) => boolean {
  const want = (labels ?? '')
    .split(',')
    .filter((p) => p !== '')
    .map((p) => p.split('=') as [string, string]);
  const name = fields?.startsWith('metadata.name=') ? fields.slice('metadata.name='.length) : undefined;
  return (o) =>
    (name === undefined || o.metadata.name === name) && want.every(([k, v]) => o.metadata.labels?.[k] === v);
}
