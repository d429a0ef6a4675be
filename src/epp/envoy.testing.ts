/**
 * A gRPC client that plays Envoy's ext_proc filter in FULL_DUPLEX_STREAMED mode, built from the
 * same vendored protos as the picker (tests and bench only): it streams one HTTP request's headers
 * and body (split where told), reads the picker's answer, proxies to the endpoint it names with a
 * real HTTP request, and streams the response back through the picker.
 */
import { credentials, type ClientDuplexStream, type Client } from '@grpc/grpc-js';
import { eppProtos, type PbStruct, type ProcessingRequest, type ProcessingResponse } from './protos.js';
import {
  DESTINATION_HEADER,
  LB_NAMESPACE,
  SERVED_HEADER,
  SUBSET_HEADER,
  SUBSET_NAMESPACE,
} from './stream.js';

type Call = ClientDuplexStream<ProcessingRequest, ProcessingResponse>;
interface ProcessClient extends Client {
  Process(): Call;
}

export interface EnvoyRequest {
  readonly path?: string;
  readonly method?: string;
  readonly body?: Buffer | string | object;
  /** Body chunk sizes, used in turn (cycled); default one chunk. */
  readonly split?: readonly number[];
  readonly headers?: Record<string, string>;
  /** Subset hint sent as metadata (envoy.lb.subset_hint). */
  readonly subsetMetadata?: readonly string[];
  /** Subset hint sent as the header. */
  readonly subsetHeader?: string;
  /** End the body with request trailers instead of end_of_stream. */
  readonly trailers?: boolean;
  /** Stop here, cancelling the stream: after the picker's answer, or half-way through the response. */
  readonly cancelAt?: 'decision' | 'response';
  /** Proxy to this endpoint instead of the one picked (a fallback), telling the picker so. */
  readonly serveAt?: (picked: string[]) => string;
  /** Not proxied: a response with this status and body is streamed back instead. */
  readonly fakeResponse?: { status: number; body: string; headers?: Record<string, string> };
}

export interface EnvoyResult {
  /** The ImmediateResponse's status, when the picker answered the request itself. */
  readonly immediate?: { status: number; body: string; headers: Record<string, string> };
  /** x-gateway-destination-endpoint, split. */
  readonly destination?: string[];
  readonly metadataDestination?: string;
  /** The request body as the picker handed it back. */
  readonly forwardedBody?: Buffer;
  readonly bodyChunkSizes?: number[];
  /** Response kinds in the order they came. */
  readonly order: string[];
  readonly status?: number;
  /** What the client gets: the response body as the picker handed it back. */
  readonly clientBody?: string;
  /** Time from the request's end_of_stream to the headers answer, ms. */
  readonly decisionMs?: number;
}

function headerList(h: Record<string, string>): { key: string; raw_value: Buffer }[] {
  return Object.entries(h).map(([key, v]) => ({ key, raw_value: Buffer.from(v) }));
}

function readHeaderMutation(r: ProcessingResponse): Record<string, string> {
  const out: Record<string, string> = {};
  const set =
    r.request_headers?.response?.header_mutation?.set_headers ??
    r.immediate_response?.headers?.set_headers ??
    [];
  for (const o of set) out[o.header.key] = o.header.raw_value?.toString() ?? o.header.value ?? '';
  return out;
}

function lbValue(s: PbStruct | undefined): string | undefined {
  return s?.fields?.[LB_NAMESPACE]?.structValue?.fields?.[DESTINATION_HEADER]?.stringValue;
}

/** The messages of a stream, read in order as they come. */
class Inbox {
  private readonly queue: ProcessingResponse[] = [];
  private waiter: ((r: ProcessingResponse | undefined) => void) | undefined;
  ended = false;
  error: Error | undefined;
  constructor(call: Call) {
    call.on('data', (r: ProcessingResponse) => {
      if (this.waiter) {
        const w = this.waiter;
        this.waiter = undefined;
        w(r);
      } else this.queue.push(r);
    });
    const end = (): void => {
      this.ended = true;
      const w = this.waiter;
      this.waiter = undefined;
      w?.(undefined);
    };
    call.on('end', end);
    call.on('error', (e: Error) => {
      this.error = e;
      end();
    });
  }
  next(): Promise<ProcessingResponse | undefined> {
    const r = this.queue.shift();
    if (r) return Promise.resolve(r);
    if (this.ended) return Promise.resolve(undefined);
    return new Promise((resolve) => (this.waiter = resolve));
  }
}

export class FakeEnvoy {
  private readonly client: ProcessClient;

  /** `ownConnection`: not shared with other clients to the same address (one per Envoy worker). */
  constructor(address: string, opts: { ownConnection?: boolean } = {}) {
    const { ExternalProcessor } = eppProtos();
    this.client = new ExternalProcessor(address, credentials.createInsecure(), {
      'grpc.max_receive_message_length': 8 << 20,
      'grpc.max_send_message_length': 8 << 20,
      ...(opts.ownConnection ? { 'grpc.use_local_subchannel_pool': 1 } : {}),
    }) as unknown as ProcessClient;
  }

  close(): void {
    this.client.close();
  }

  async request(q: EnvoyRequest): Promise<EnvoyResult> {
    const call = this.client.Process();
    const inbox = new Inbox(call);
    const order: string[] = [];
    const path = q.path ?? '/v1/chat/completions';
    const body =
      q.body === undefined
        ? Buffer.alloc(0)
        : Buffer.isBuffer(q.body)
          ? q.body
          : Buffer.from(typeof q.body === 'string' ? q.body : JSON.stringify(q.body));
    const headers: Record<string, string> = {
      ':method': q.method ?? 'POST',
      ':path': path,
      ':authority': 'gateway',
      'content-type': 'application/json',
      ...(q.subsetHeader !== undefined ? { [SUBSET_HEADER]: q.subsetHeader } : {}),
      ...q.headers,
    };
    const metadata: ProcessingRequest['metadata_context'] =
      q.subsetMetadata !== undefined
        ? {
            filter_metadata: {
              [SUBSET_NAMESPACE]: {
                fields: {
                  [SUBSET_HEADER]: {
                    listValue: { values: q.subsetMetadata.map((s) => ({ stringValue: s })) },
                  },
                },
              },
            },
          }
        : undefined;
    call.write({
      request_headers: { headers: { headers: headerList(headers) }, end_of_stream: body.length === 0 },
      ...(metadata ? { metadata_context: metadata } : {}),
    });
    // The body, at the boundaries asked for; stops early if the picker answers (a 413).
    let sentEndAt = 0;
    if (body.length > 0) {
      const split = q.split ?? [body.length];
      let i = 0;
      let k = 0;
      while (i < body.length) {
        if (inbox.ended) break;
        const n = Math.max(1, split[k++ % split.length]!);
        const chunk = body.subarray(i, i + n);
        i += chunk.length;
        const last = i >= body.length;
        call.write({ request_body: { body: chunk, end_of_stream: last && !q.trailers } });
        if (last) sentEndAt = performance.now();
        // Let big bodies flow (the picker may answer before all of it is sent).
        if (body.length > 1 << 20 && k % 8 === 0) await new Promise((r) => setImmediate(r));
      }
      if (q.trailers && !inbox.ended) {
        call.write({ request_trailers: { trailers: { headers: [] } } });
        sentEndAt = performance.now();
      }
    } else sentEndAt = performance.now();
    const first = await inbox.next();
    const decisionMs = performance.now() - sentEndAt;
    if (first === undefined) throw inbox.error ?? new Error('stream ended without an answer');
    order.push(first.response ?? '?');
    if (first.immediate_response) {
      const ir = first.immediate_response;
      call.end();
      await drainEnd(inbox);
      return {
        immediate: {
          status: ir.status.code,
          body: ir.body?.toString() ?? '',
          headers: readHeaderMutation(first),
        },
        order,
        decisionMs,
      };
    }
    const hdrs = readHeaderMutation(first);
    const destination = hdrs[DESTINATION_HEADER]?.split(',');
    const metadataDestination = lbValue(first.dynamic_metadata);
    if (q.cancelAt === 'decision') {
      call.cancel();
      return { destination, metadataDestination, order, decisionMs };
    }
    // The body handed back, then (if sent) the trailers answer.
    const parts: Buffer[] = [];
    const sizes: number[] = [];
    if (body.length > 0)
      for (;;) {
        const r = await inbox.next();
        if (!r) throw inbox.error ?? new Error('stream ended in the request body');
        order.push(r.response ?? '?');
        const sr = r.request_body?.response?.body_mutation?.streamed_response;
        if (!sr) throw new Error(`expected a request_body answer, got ${r.response}`);
        parts.push(sr.body ?? Buffer.alloc(0));
        sizes.push(sr.body?.length ?? 0);
        if (sr.end_of_stream || (q.trailers && sizes.reduce((a, b) => a + b, 0) >= body.length)) break;
      }
    if (q.trailers) {
      const r = await inbox.next();
      order.push(r?.response ?? '?');
    }
    const forwardedBody = Buffer.concat(parts);
    // Proxy to the endpoint, as Envoy's original-destination cluster does.
    const target = q.serveAt ? q.serveAt(destination ?? []) : destination![0]!;
    let status: number;
    let respHeaders: Record<string, string>;
    let chunks: AsyncIterable<Uint8Array> | Uint8Array[];
    if (q.fakeResponse) {
      status = q.fakeResponse.status;
      respHeaders = q.fakeResponse.headers ?? {};
      chunks = [Buffer.from(q.fakeResponse.body)];
    } else {
      const res = await fetch(`http://${target}${path}`, {
        method: headers[':method'],
        headers: { 'content-type': 'application/json' },
        ...(forwardedBody.length > 0 ? { body: forwardedBody } : {}),
      });
      status = res.status;
      respHeaders = Object.fromEntries(res.headers);
      chunks = res.body ?? [];
    }
    call.write({
      response_headers: {
        headers: {
          headers: headerList({ ':status': String(status), ...respHeaders, [SERVED_HEADER]: target }),
        },
        end_of_stream: false,
      },
    });
    const rh = await inbox.next();
    order.push(rh?.response ?? '?');
    const out: Buffer[] = [];
    let sentChunks = 0;
    for await (const c of chunks) {
      call.write({ response_body: { body: Buffer.from(c), end_of_stream: false } });
      sentChunks++;
      if (q.cancelAt === 'response') {
        call.cancel();
        return { destination, metadataDestination, order, decisionMs, forwardedBody, status };
      }
    }
    call.write({ response_body: { body: Buffer.alloc(0), end_of_stream: true } });
    for (;;) {
      const r = await inbox.next();
      if (!r) break;
      order.push(r.response ?? '?');
      const sr = r.response_body?.response?.body_mutation?.streamed_response;
      if (sr) {
        out.push(sr.body ?? Buffer.alloc(0));
        if (sr.end_of_stream) break;
      }
    }
    void sentChunks;
    call.end();
    await drainEnd(inbox);
    return {
      destination,
      metadataDestination,
      forwardedBody,
      bodyChunkSizes: sizes,
      order,
      status,
      clientBody: Buffer.concat(out).toString(),
      decisionMs,
    };
  }
}

async function drainEnd(inbox: Inbox): Promise<void> {
  while ((await inbox.next()) !== undefined);
}
