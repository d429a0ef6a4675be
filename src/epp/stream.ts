/**
 * One ext_proc stream: one HTTP request as the gateway (Envoy) streams it to the picker, in
 * FULL_DUPLEX_STREAMED body mode — request headers, body chunks, end of stream → the pick
 * (`x-gateway-destination-endpoint` and `envoy.lb` metadata), the body handed back → then the
 * response for accounting (usage, time to first byte, status), as the Gateway API Inference
 * Extension's endpoint pickers do. Everything it takes — a router-queue place, a scheduler slot, a
 * quota lease — is given back in `release`, once, from the stream's end (whatever ends it).
 *
 * Why one file of ~680 lines: it is `Flight` (src/proxy/flight.ts) for a gateway's stream, kept in
 * one piece for the same reason (issue #21) — what a request takes and the one place each is given
 * back must be readable together, and the stream's phases (headers, body, pick, response,
 * accounting) all move the same few fields. What is not the stream's own life is beside it or
 * shared with `serve`: the endpoint set (`endpoints.ts`), body parsing and routes
 * (src/proxy/routes.ts), usage reading (src/proxy/usage.ts, stream-usage.ts), the quota gate.
 */
import { EventEmitter } from 'node:events';
import type { ServerDuplexStream } from '@grpc/grpc-js';
import type { CompletionReport, Decision, RejectReason, RequestInfo } from '../core/types.js';
import { estimateRequestTokens, leaseCovers, passGate, TASK_ID_HEADER } from '../admission/proxy-gate.js';
import { errorBody, type ErrorFormat } from '../http/errors.js';
import { jsonDepthExceeds } from '../http/body.js';
import { DEFAULT_MAX_JSON_DEPTH, now, type FlightHost } from '../proxy/flight.js';
import { parseRetryAfter } from '../proxy/cooldowns.js';
import {
  BadRequest,
  parseBody,
  PROXY_ROUTES,
  OBJECTIVE_HEADER,
  TASK_HINT_HEADER,
  taskHintOf,
  type ParsedRequest,
  type ProxyRoute,
} from '../proxy/routes.js';
import { usagePlan, SseUsageScanner } from '../proxy/stream-usage.js';
import { responseUsage, TailBuffer, type Usage } from '../proxy/usage.js';
import { Endpoints, parseSubset } from './endpoints.js';
import type {
  HeaderMap,
  HeaderValueOption,
  HttpBody,
  HttpHeaders,
  ProcessingRequest,
  ProcessingResponse,
} from './protos.js';

/** The header (and `envoy.lb` metadata key) naming the picked endpoint, then its fallbacks. */
export const DESTINATION_HEADER = 'x-gateway-destination-endpoint';
/** The gateway's hint of the endpoints it may use (header, or metadata under SUBSET_NAMESPACE). */
export const SUBSET_HEADER = 'x-gateway-destination-endpoint-subset';
export const SUBSET_NAMESPACE = 'envoy.lb.subset_hint';
export const LB_NAMESPACE = 'envoy.lb';
/** The endpoint that served the request, in the response headers. */
export const SERVED_HEADER = 'x-gateway-destination-endpoint-served';
/** Largest body chunk sent back to the gateway (gateway-api-inference-extension's limit). */
export const BODY_CHUNK_BYTES = 62_000;
/** Bytes of a response kept for its usage at the end (as serve's UpstreamExchange). */
const USAGE_TAIL_BYTES = 64 * 1024;

/** Routes for gateway paths that are not llmlb's own (a rewritten prefix, a versioned API). */
const CHAT_FALLBACK = PROXY_ROUTES.get('/v1/chat/completions')!;
const COMPLETIONS_FALLBACK = PROXY_ROUTES.get('/v1/completions')!;

/** What the streams of one picker share: the router core (as `serve` builds it) and the endpoints. */
export interface EppContext {
  readonly host: FlightHost;
  readonly endpoints: Endpoints;
  /** Fallback endpoints named after the pick. */
  readonly fallbacks: number;
  /** Streams open now (tests and the bench check it returns to 0). */
  open: number;
  /**
   * Told each pick's added latency, ms from the request's end to the headers answer, and whether
   * the policy held it in the router queue first (bench).
   */
  readonly onDecision?: ((ms: number, held: boolean) => void) | undefined;
}

/** The quota lease's view of the stream (proxy-gate's GateClient): 'close' when the stream ends. */
class StreamLife extends EventEmitter {
  destroyed = false;
  end(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.emit('close');
  }
}

type Call = ServerDuplexStream<ProcessingRequest, ProcessingResponse>;

const EMPTY = Buffer.alloc(0);

/** A header's value, Envoy's raw_value (bytes) first. */
function headerValue(h: { value?: string; raw_value?: Buffer }): string {
  return h.raw_value !== undefined && h.raw_value.length > 0
    ? h.raw_value.toString('latin1')
    : (h.value ?? '');
}

function headerObject(map: HeaderMap | undefined): Record<string, string> {
  const out = Object.create(null) as Record<string, string>;
  for (const h of map?.headers ?? []) out[h.key.toLowerCase()] = headerValue(h);
  return out;
}

function setHeader(key: string, value: string): HeaderValueOption {
  return { header: { key, raw_value: Buffer.from(value, 'latin1') }, append_action: 2 };
}

function routeFor(path: string | undefined): ProxyRoute {
  const p = path === undefined ? '' : path.split('?', 1)[0]!;
  const r = PROXY_ROUTES.get(p);
  if (r) return r;
  return p.endsWith('/completions') && !p.endsWith('/chat/completions')
    ? COMPLETIONS_FALLBACK
    : CHAT_FALLBACK;
}

export class EppStream {
  private headers: Record<string, string> = Object.create(null) as Record<string, string>;
  private route: ProxyRoute = CHAT_FALLBACK;
  private subsetHint: ReadonlySet<string> | undefined;
  private chunks: Buffer[] = [];
  private size = 0;
  /** Over maxBodyBytes: answered 413, the rest ignored. */
  private answered = false;
  private info: RequestInfo | undefined;
  private parsed: ParsedRequest | undefined;
  private readonly life = new StreamLife();
  /** Waiting in the router queue. */
  private queued = false;
  /** Was held in the router queue before its decision. */
  private held = false;
  /** Holds a scheduler slot (dispatched, not yet completed). */
  private holding = false;
  private released = false;
  private backend: string | undefined;
  private dispatchedAt = 0;
  private firstByteAt: number | undefined;
  private status = 0;
  private served: string | undefined;
  private tail: TailBuffer | undefined;
  private scanner: SseUsageScanner | undefined;
  /** Messages still to handle while one is being decided (the pick may wait). */
  private pending: ProcessingRequest[] = [];
  private busy = false;
  /** When the request's end reached the picker (decision latency is measured from here). */
  requestEndAt = 0;

  constructor(
    private readonly ctx: EppContext,
    private readonly call: Call,
  ) {
    ctx.open++;
    call.on('data', (m: ProcessingRequest) => this.push(m));
    call.on('end', () => this.close(true));
    call.on('cancelled', () => this.close(false));
    call.on('error', () => this.close(false));
    call.on('close', () => this.close(false));
  }

  private get format(): ErrorFormat {
    return this.route.api;
  }

  private push(m: ProcessingRequest): void {
    if (this.released) return;
    if (this.busy) this.pending.push(m);
    else this.run(m);
  }

  /**
   * Handles one message; while one waits (the pick, or the gateway reading our answers slower
   * than it sends: the write buffer full), the stream is paused so HTTP/2 flow control holds the
   * gateway back instead of messages piling up here.
   */
  private run(m: ProcessingRequest): void {
    const r = this.handle(m);
    if (r) {
      this.wait();
      void r.then(this.drain, this.failed);
    } else if (this.call.writableNeedDrain && !this.released) {
      this.wait();
      this.call.once('drain', this.drain);
    }
  }

  private wait(): void {
    this.busy = true;
    this.call.pause();
  }

  private readonly drain = (): void => {
    this.busy = false;
    while (!this.busy && this.pending.length > 0 && !this.released) this.run(this.pending.shift()!);
    if (!this.busy) this.call.resume();
  };

  private readonly failed = (err: unknown): void => {
    this.ctx.host.log.error({ err }, 'epp: stream failed');
    this.busy = false;
    this.reply({ immediate_response: this.immediate(500, 'internal error', 'internal_error') });
    this.release(false);
    this.call.end();
  };

  /** One message; a promise only when it must wait (the pick). */
  private handle(m: ProcessingRequest): Promise<void> | undefined {
    switch (m.request) {
      case 'request_headers':
        return this.onRequestHeaders(m, m.request_headers!);
      case 'request_body':
        return this.onRequestBody(m.request_body!);
      case 'request_trailers':
        if (this.answered) return undefined;
        if (this.backend === undefined) {
          const r = this.decide(false);
          if (r) return r.then(() => this.trailersDone());
        }
        this.trailersDone();
        return undefined;
      case 'response_headers':
        this.onResponseHeaders(m.response_headers!);
        return undefined;
      case 'response_body':
        this.onResponseBody(m.response_body!);
        return undefined;
      case 'response_trailers':
        this.reply({ response_trailers: {} });
        this.finish();
        return undefined;
      default:
        return undefined;
    }
  }

  private trailersDone(): void {
    if (!this.answered) this.reply({ request_trailers: {} });
  }

  private onRequestHeaders(m: ProcessingRequest, h: HttpHeaders): Promise<void> | undefined {
    this.headers = headerObject(h.headers);
    this.route = routeFor(this.headers[':path']);
    const hint = m.metadata_context?.filter_metadata?.[SUBSET_NAMESPACE]?.fields?.[SUBSET_HEADER];
    const listed = hint?.listValue?.values?.map((v) => v.stringValue ?? '') ?? [];
    const header = this.headers[SUBSET_HEADER];
    this.subsetHint = parseSubset(header === undefined ? listed : [...listed, header]);
    // A request without a body (GET) names no model: answered now.
    return h.end_of_stream === true ? this.decide(true) : undefined;
  }

  private onRequestBody(b: HttpBody): Promise<void> | undefined {
    if (this.answered) return undefined;
    const body = b.body;
    if (body !== undefined && body.length > 0) {
      this.size += body.length;
      const max = this.ctx.host.settings.server.maxBodyBytes;
      if (this.size > max) {
        this.chunks = [];
        this.refuse(413, `body over ${max} bytes`, 'body_too_large');
        return undefined;
      }
      this.chunks.push(body);
    }
    return b.end_of_stream === true ? this.decide(true) : undefined;
  }

  /**
   * The whole request is here: parse it, pass the quota, pick; answer the gateway. Synchronous in
   * the common case (no quota, a backend free now): a promise only when it must wait.
   */
  private decide(bodyEnded: boolean): Promise<void> | undefined {
    this.requestEndAt = now();
    const h = this.ctx.host;
    const raw = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.size);
    this.chunks = [];
    const depth = h.settings.server.maxJsonDepth ?? DEFAULT_MAX_JSON_DEPTH;
    if (jsonDepthExceeds(raw, depth))
      return this.refuse(400, `JSON body nested deeper than ${depth} levels`, 'body_too_deep');
    let body: Record<string, unknown>;
    try {
      ({ body, parsed: this.parsed } = parseBody(this.route, raw));
    } catch (err) {
      if (!(err instanceof BadRequest)) throw err;
      return this.refuse(400, err.message, err.code);
    }
    const parsed = this.parsed;
    if (!h.scheduler.models().has(parsed.model)) {
      const pending = h.fleet.undiscovered();
      if (pending.length > 0)
        return this.refuse(
          503,
          `model '${parsed.model}' not available: model discovery has not succeeded on ${pending.map((rt) => rt.config.name).join(', ')}`,
          'model_unavailable',
        );
      const list = [...h.scheduler.models()].sort().join(', ');
      return this.refuse(
        404,
        `model '${parsed.model}' not found; available: ${list || '(none)'}`,
        'model_not_found',
      );
    }
    const t0 = this.requestEndAt;
    const info: RequestInfo = {
      id: h.nextRequestId(),
      model: parsed.model,
      api: this.route.api,
      arrivedAt: t0,
      promptText: parsed.promptText,
      maxTokens: parsed.maxTokens,
      sessionKey: this.sessionKey(parsed),
      taskHint: taskHintOf(this.headers[h.settings.server.taskHintHeader ?? TASK_HINT_HEADER]),
      priority: h.objectives.priority(h.settings.objectives, this.headers[OBJECTIVE_HEADER]),
    };
    this.info = info;
    if (h.admission.hasQuota(parsed.model))
      return this.passQuota(parsed).then((go) =>
        go ? this.pick(info, parsed, raw, body, bodyEnded) : undefined,
      );
    return this.pick(info, parsed, raw, body, bodyEnded);
  }

  private pick(
    info: RequestInfo,
    parsed: ParsedRequest,
    raw: Buffer,
    body: Record<string, unknown>,
    bodyEnded: boolean,
  ): Promise<void> | undefined {
    const exclude = this.excluded(info.arrivedAt);
    const d = this.schedule(info, exclude);
    if (!(d instanceof Promise)) {
      this.answer(d, info, parsed, raw, body, bodyEnded, exclude);
      return undefined;
    }
    return d.then((decided) => {
      // undefined: the stream ended while it waited
      if (decided !== undefined && !this.released)
        this.answer(decided, info, parsed, raw, body, bodyEnded, exclude);
    });
  }

  /** The scheduler's decision, carried to the gateway (endpoint and body) or answered here. */
  private answer(
    d: Decision,
    info: RequestInfo,
    parsed: ParsedRequest,
    raw: Buffer,
    body: Record<string, unknown>,
    bodyEnded: boolean,
    exclude: ReadonlySet<string>,
  ): void {
    const h = this.ctx.host;
    const t0 = info.arrivedAt;
    h.decisionLog.record({
      atMs: Date.now(),
      requestId: this.headers['x-request-id'] ?? info.id,
      model: parsed.model,
      policy: h.scheduler.policyName,
      backend: d.type === 'dispatch' ? d.backend : null,
      outcome: d.type,
      reason: d.type === 'reject' ? d.reason : undefined,
      queuedMs: Math.round((now() - t0) * 100) / 100,
      attempt: 1,
      class: d.type === 'dispatch' ? h.decisionLog.classOf(info.id, d.backend) : null,
      scores: h.decisionLog.take(info.id),
    });
    if (d.type === 'reject') return this.rejected(d.reason);
    const backend = d.backend;
    const addr = this.ctx.endpoints.addressOf(backend);
    if (addr === undefined) return this.refuse(503, `backend '${backend}' was removed`, 'no_backend');
    this.backend = backend;
    this.dispatchedAt = now();
    const fb = this.ctx.endpoints.fallbacks(h.scheduler, parsed.model, backend, exclude, this.ctx.fallbacks);
    const dest = fb.length === 0 ? addr : `${addr},${fb.join(',')}`;
    // An OpenAI stream whose client did not ask for usage: asked for here, the extra event
    // dropped on the way back (as serve does, stream-usage.ts).
    let out = raw;
    let scan: 'drop' | 'count' | undefined;
    if (parsed.stream && this.route.api === 'openai' && this.route.body === undefined) {
      const rt = h.fleet.get(backend);
      const plan = usagePlan(raw, body, rt?.config.streamUsage !== false);
      if (plan.body !== undefined) out = plan.body;
      if (plan.scan !== 'none') scan = plan.scan;
    }
    if (parsed.stream && this.route.api === 'openai') this.scanner = new SseUsageScanner(scan === 'drop');
    else this.tail = new TailBuffer(USAGE_TAIL_BYTES);
    const setHeaders = [setHeader(DESTINATION_HEADER, dest)];
    // The body handed back may differ in length (usage asked for): the gateway recomputes it.
    const removeHeaders = out === raw ? undefined : ['content-length'];
    this.reply({
      request_headers: {
        response: {
          header_mutation: {
            set_headers: setHeaders,
            ...(removeHeaders ? { remove_headers: removeHeaders } : {}),
          },
          clear_route_cache: true,
        },
      },
      dynamic_metadata: {
        fields: {
          [LB_NAMESPACE]: { structValue: { fields: { [DESTINATION_HEADER]: { stringValue: dest } } } },
        },
      },
    });
    this.ctx.onDecision?.(now() - this.requestEndAt, this.held);
    if (this.size > 0 || out.length > 0) this.sendBody('request_body', out, bodyEnded);
  }

  /** The body handed back in chunks of at most BODY_CHUNK_BYTES, the last one ending the stream. */
  private sendBody(kind: 'request_body' | 'response_body', b: Buffer, end: boolean): void {
    if (b.length === 0) {
      this.reply({
        [kind]: { response: { body_mutation: { streamed_response: { body: EMPTY, end_of_stream: end } } } },
      });
      return;
    }
    for (let i = 0; i < b.length; i += BODY_CHUNK_BYTES) {
      const last = i + BODY_CHUNK_BYTES >= b.length;
      this.reply({
        [kind]: {
          response: {
            body_mutation: {
              streamed_response: { body: b.subarray(i, i + BODY_CHUNK_BYTES), end_of_stream: last && end },
            },
          },
        },
      });
    }
  }

  private sessionKey(parsed: ParsedRequest): string | undefined {
    const sk = this.ctx.host.settings.sessionKey;
    const s = this.headers[sk?.header ?? 'x-session-token'];
    return s !== undefined && s !== '' ? s : parsed.user;
  }

  /** Per-model quota (serve's gate): over it, the stream waits here; refused → 429 (shed) or its status. */
  private async passQuota(parsed: ParsedRequest): Promise<boolean> {
    const { admission, settings, log } = this.ctx.host;
    if (!admission.hasQuota(parsed.model)) return true;
    const taskId = this.headers[TASK_ID_HEADER];
    if (taskId !== undefined && (await leaseCovers(admission, taskId, parsed.model))) return true;
    const gate = await passGate(
      admission,
      parsed.model,
      estimateRequestTokens(parsed.promptText, parsed.maxTokens),
      this.life,
      () => this.released,
      settings.queue.maxWaitMs,
      log,
    );
    if (gate.kind === 'go') return true;
    if (gate.kind === 'fail') {
      // Over the quota for longer than the queue wait: shed (429), as gateways expect.
      const status = gate.code === 'quota_wait_timeout' ? 429 : gate.status;
      this.refuse(status, gate.message, gate.code, gate.retryAfterS);
    }
    return false;
  }

  /** Backends resting after a 429, and those outside the gateway's subset hint. */
  private excluded(t: number): ReadonlySet<string> {
    const cooling = this.ctx.host.cooldowns.cooling(t);
    if (!cooling && !this.subsetHint) return NONE;
    const s = new Set<string>(cooling ?? []);
    if (this.subsetHint) for (const n of this.ctx.endpoints.outside(this.subsetHint)) s.add(n);
    return s;
  }

  /** Submits: the decision now, or when the router queue lets it go; undefined if the stream ended first. */
  private schedule(
    info: RequestInfo,
    exclude: ReadonlySet<string>,
  ): Decision | Promise<Decision | undefined> {
    const h = this.ctx.host;
    const t = now();
    h.decisionLog.rearm(t);
    h.waiters.submitting = info.id;
    let ds: Decision[];
    try {
      ds = h.scheduler.submit(info, t, exclude);
    } finally {
      h.waiters.submitting = undefined;
    }
    h.waiters.apply(ds);
    for (const d of ds)
      if (d.request.id === info.id) {
        this.holding = d.type === 'dispatch';
        return d;
      }
    this.queued = this.held = true;
    return h.waiters.wait(info.id).then((d) => {
      this.queued = false;
      this.holding = d.type === 'dispatch';
      if (this.released && this.holding) {
        // The stream ended as the slot came: given back at once.
        this.holding = false;
        h.waiters.apply(h.scheduler.cancel(info.id, now()).decisions);
        return undefined;
      }
      return d;
    });
  }

  private rejected(reason: RejectReason): void {
    const model = this.parsed!.model;
    if (reason === 'no-backend') {
      const cooling = this.ctx.host.cooldowns.cooling(now());
      if (cooling && cooling.size > 0)
        return this.refuse(
          429,
          `every backend serving '${model}' is saturated`,
          'saturated',
          this.ctx.host.cooldowns.retryAfterS(now()),
        );
      return this.refuse(503, `no ready backend serves model '${model}'`, 'no_backend', 1);
    }
    // A full router queue, or a wait past queue.maxWaitMs: the request is shed.
    return this.refuse(
      429,
      reason === 'queue-full' ? 'router queue is full' : 'timed out waiting in the router queue',
      reason.replace('-', '_'),
      1,
    );
  }

  private immediate(
    status: number,
    message: string,
    code: string,
    retryAfterS?: number,
  ): ProcessingResponse['immediate_response'] {
    const set = [setHeader('content-type', 'application/json')];
    if (retryAfterS !== undefined) set.push(setHeader('retry-after', String(retryAfterS)));
    return {
      status: { code: status },
      headers: { set_headers: set },
      body: Buffer.from(errorBody(this.format, status, message, code)),
      details: code,
    };
  }

  /** Answers the request itself (no endpoint): an ImmediateResponse; the stream then ends. */
  private refuse(status: number, message: string, code: string, retryAfterS?: number): undefined {
    this.answered = true;
    this.status = status;
    this.reply({ immediate_response: this.immediate(status, message, code, retryAfterS) });
    const h = this.ctx.host;
    h.metrics.countRequest('none', status);
    if (h.log.isLevelEnabled('info')) h.log.info({ status, code, epp: true }, message);
    this.release(false);
    this.call.end();
    return undefined;
  }

  private onResponseHeaders(r: HttpHeaders): void {
    const hs = headerObject(r.headers);
    this.status = Number(hs[':status'] ?? 0);
    this.served = hs[SERVED_HEADER];
    const backend = this.backend;
    if (backend !== undefined && this.status === 429) {
      const h = this.ctx.host;
      h.cooldowns.cool(backend, now(), parseRetryAfter(hs['retry-after'], Date.now()));
    }
    this.reply({ response_headers: { response: {} } });
    if (r.end_of_stream === true) this.finish();
  }

  private onResponseBody(b: HttpBody): void {
    const chunk = b.body ?? EMPTY;
    if (this.firstByteAt === undefined && chunk.length > 0) this.firstByteAt = now();
    let out = chunk;
    if (this.scanner) {
      out = chunk.length > 0 ? this.scanner.push(chunk) : EMPTY;
      if (b.end_of_stream === true) {
        const rest = this.scanner.end();
        if (rest.length > 0) out = out.length === 0 ? rest : Buffer.concat([out, rest]);
      }
    } else if (chunk.length > 0) this.tail?.push(chunk);
    this.sendBody('response_body', out, b.end_of_stream === true);
    if (b.end_of_stream === true) this.finish();
  }

  /** The response ended: the request is completed in the scheduler (estimators, quotas, metrics). */
  private finish(): void {
    if (this.backend === undefined || this.released) return;
    this.release(true);
  }

  private usage(): Usage {
    const p = this.parsed!;
    if (this.scanner) {
      const u = this.scanner.usage;
      if (u) return u;
      return this.scanner.contentEvents > 0 ? { completionTokens: this.scanner.contentEvents } : {};
    }
    return this.tail ? responseUsage(this.tail, this.route.api, p.stream) : {};
  }

  /**
   * Gives back all the stream holds, once: its router-queue place, its slot (completed with the
   * response's usage when one came, else cancelled), its quota lease.
   */
  private release(responded: boolean): void {
    if (this.released) return;
    this.released = true;
    const h = this.ctx.host;
    const info = this.info;
    try {
      if (info !== undefined && this.queued) {
        this.queued = false;
        h.waiters.drop(info.id);
        h.waiters.apply(h.scheduler.cancel(info.id, now()).decisions);
      }
      if (info !== undefined && this.holding) {
        this.holding = false;
        const backend = this.backend!;
        const t = now();
        // Served by another endpoint (a fallback): not this backend's timing to learn from.
        const servedBy =
          this.served === undefined ? backend : (this.ctx.endpoints.nameAt(this.served) ?? backend);
        const ok = responded && this.status > 0 && this.status < 400 && servedBy === backend;
        if (!responded) h.waiters.apply(h.scheduler.cancel(info.id, t).decisions);
        else {
          const usage = ok ? this.usage() : {};
          const report: CompletionReport = {
            ok,
            dispatchedAt: this.dispatchedAt,
            firstByteAt: this.firstByteAt,
            firstByteIsWholeAnswer: !this.parsed!.stream,
            finishedAt: t,
            promptTokens: usage.promptTokens,
            completionTokens: usage.completionTokens,
            promptEvalMs: usage.promptEvalMs,
            evalMs: usage.evalMs,
            cachedTokens: usage.cachedTokens,
          };
          h.waiters.apply(h.scheduler.complete(info.id, report, t));
          this.account(servedBy, usage, t);
        }
      }
      if (info !== undefined) h.decisionLog.forget(info.id);
    } finally {
      this.life.end();
      this.ctx.open--;
    }
  }

  /** Metrics and dashboard for a response that came through: counted on the backend that served it. */
  private account(servedBy: string, usage: Usage, t: number): void {
    const h = this.ctx.host;
    const status = this.status;
    h.metrics.countRequest(servedBy, status);
    if (status >= 500) h.fleet.recordFailure(servedBy, `status ${status}`);
    else if (status > 0 && status < 400) {
      h.fleet.recordSuccess(servedBy);
      const m = h.metrics.of(servedBy);
      m.upstreamSeconds.observe((t - this.dispatchedAt) / 1000);
      if (this.firstByteAt !== undefined)
        m.ttfbSeconds.observe((this.firstByteAt - this.dispatchedAt) / 1000);
    }
    const ok = status > 0 && status < 400;
    h.stats.record({
      backend: servedBy,
      at: Date.now(),
      ok,
      latencyMs: t - this.requestEndAt,
      ttfbMs:
        this.firstByteAt !== undefined && this.parsed!.stream
          ? this.firstByteAt - this.requestEndAt
          : undefined,
      outputTokens: usage.completionTokens,
      generation: this.route.body === undefined || this.route.body === 'responses',
      error: ok ? undefined : `status ${status}`,
    });
  }

  private reply(r: ProcessingResponse): void {
    if (this.call.writable) this.call.write(r);
  }

  /** The gateway closed its side (`ended`) or the stream broke: whatever is still held is given back. */
  private close(ended: boolean): void {
    if (!this.released) this.release(ended && this.status > 0 && this.backend !== undefined);
    if (ended && this.call.writable) this.call.end();
  }
}

const NONE: ReadonlySet<string> = new Set();
