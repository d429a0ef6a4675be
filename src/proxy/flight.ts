/**
 * One client request's life, socket to answer, in one file on purpose (issue #21): what it
 * takes (queue place, slot, lease) and where each is given back can be read in one place.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { RouterConfig } from '../config/schema.js';
import type { Scheduler } from '../core/scheduler.js';
import type { CompletionReport, Decision, RejectReason, RequestInfo } from '../core/types.js';
import { backoffMs } from '../core/backoff.js';
import type { Fleet } from '../fleet/fleet.js';
import type { LiveStats } from '../dashboard/live-stats.js';
import type { RouterMetrics } from '../metrics/router-metrics.js';
import { TASK_ID_HEADER, estimateRequestTokens, leaseCovers, passGate } from '../admission/proxy-gate.js';
import type { Admission } from '../admission/service.js';
import { traceApiOf } from '../api/endpoints.js';
import { BodyTooLarge, jsonDepthExceeds, readBody } from '../http/body.js';
import { parseRetryAfter, type Cooldowns } from './cooldowns.js';
import type { DecisionLog, DecisionWaiters } from './decision-log.js';
import { sendError, type ErrorFormat } from '../http/errors.js';
import {
  BadRequest,
  parseBody,
  OBJECTIVE_HEADER,
  TASK_HINT_HEADER,
  taskHintOf,
  type ParsedRequest,
  type ProxyRoute,
} from './routes.js';
import type { StallWatch } from './stall-watch.js';
import type { TraceCapture } from '../trace/capture.js';
import { upstreamTranslation } from './translate.js';
import type { AttemptBook } from './attempt-book.js';
import type { ObjectiveTable } from './objectives.js';
import { UpstreamExchange, type ExchangeEnd } from './upstream-exchange.js';
import type { Usage } from './usage.js';
import { usagePlan } from './stream-usage.js';
import { showAvoids } from './show-route.js';
import { forwardToPeer } from '../federation/forward.js';
import type { PeerRoute, TakeForPeer } from '../federation/queue-forward.js';
import { HOP_HEADER, type RouteDecision } from '../federation/types.js';

/** A federated router's forwarding decision (src/federation): where a request goes, and how it ended. */
export interface FederationHook {
  route(info: RequestInfo, forwarded: boolean): RouteDecision;
  onForwarded(info: RequestInfo, peer: string): void;
  onDone(peer: string, ok: boolean): void;
  /** A forwardable request waits in the router queue: a peer freeing up may `take` it (Algorithm 1). */
  queued(info: RequestInfo, take: TakeForPeer): void;
  /** It no longer waits there (dispatched, rejected, taken, its client left). */
  unqueued(id: string): void;
}

/** What a flight needs from the router that runs it: shared state, read-only to the flight. */
export interface FlightHost {
  /** The current configuration (replaced on reload). */
  readonly settings: RouterConfig;
  /** InferenceObjective priorities: the config's `objectives` and those discovered in Kubernetes. */
  readonly objectives: ObjectiveTable;
  readonly scheduler: Scheduler;
  readonly fleet: Fleet;
  readonly metrics: RouterMetrics;
  readonly stats: LiveStats;
  readonly admission: Admission;
  readonly log: Logger;
  readonly waiters: DecisionWaiters;
  readonly decisionLog: DecisionLog;
  readonly cooldowns: Cooldowns;
  readonly stalls: StallWatch;
  /** The attempts in flight on each backend, for giving them up when it is ejected. */
  readonly attempts: AttemptBook;
  /** Where routed requests are recorded (`trace:` in the config); undefined when not capturing. */
  readonly capture?: TraceCapture | undefined;
  /** Set when this router has peers (issue #19). */
  readonly federation?: FederationHook | undefined;
  nextRequestId(): string;
}

export const now = (): number => performance.now();

/** JSON nesting a proxied body may have (Ollama `format` schemas and `tools` nest a dozen levels). */
export const DEFAULT_MAX_JSON_DEPTH = 128;

const HOP_BY_HOP = new Set([
  'host',
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'content-length',
  'expect',
]);

/** Why an attempt did not produce a full answer. */
type AttemptResult =
  | { readonly kind: 'done' }
  /** Nothing reached the client: another backend may try. */
  | {
      readonly kind: 'retry';
      readonly error: string;
      readonly timeout: boolean;
      /** The backend answered 429: full, not broken. */
      readonly saturated: boolean;
    }
  /** Bytes went out (or the client left): the request is over. */
  | { readonly kind: 'over' };

type RetryResult = Extract<AttemptResult, { kind: 'retry' }>;

const DONE: AttemptResult = { kind: 'done' };
const OVER: AttemptResult = { kind: 'over' };
const NONE_TRIED: ReadonlySet<string> = new Set();

/**
 * One client request's life: read and check the body, pass the quota gate, then try backends
 * until one answers, streaming the answer back. Everything it takes is given back in one place:
 * the scheduler slot of each attempt in `attempt`'s settle (exactly once, whatever happens), the
 * router-queue place in `run`'s finally.
 */
export class Flight {
  private info!: RequestInfo;
  private parsed!: ParsedRequest;
  private body!: Record<string, unknown>;
  private raw!: Buffer;
  private headers!: string[];
  private readonly rid: string;
  private readonly format: ErrorFormat;
  private readonly t0 = now();
  /** The attempt under way, cancelled when the client leaves. */
  private exchange: UpstreamExchange | undefined;
  private clientGone = false;
  /** Sent to a peer once already: never again (a peer that failed before answering is ejected). */
  private peerTried = false;
  /** Waiting in the router queue (its place must be given back if the client leaves). */
  private queued = false;
  /** Dispatched and not yet settled: holds a scheduler slot. */
  private holding = false;
  private status = 0;
  /** Tokens the backend reported generating (for the dashboard's tokens/s). */
  private outputTokens: number | undefined;
  /** Prompt tokens the backend reported (for the trace capture). */
  private promptTokens: number | undefined;
  /** Client-observed time to the upstream's first byte (ms from arrival), for the dashboard. */
  private ttfbMs: number | undefined;

  constructor(
    private readonly host: FlightHost,
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly route: ProxyRoute,
  ) {
    const given = req.headers['x-request-id'];
    this.rid = typeof given === 'string' && given.length > 0 && given.length <= 200 ? given : randomUUID();
    this.format = route.endpoint.family;
  }

  async run(): Promise<void> {
    if (!(await this.readRequest())) return;
    const h = this.host;
    this.res.on('close', this.onClose);
    try {
      if (!(await this.passQuota())) return;
      await this.dispatchLoop();
    } finally {
      // Whatever way the flight ends, it leaves nothing in the router queue and holds no slot.
      if (this.queued || this.holding) {
        if (this.queued) h.federation?.unqueued(this.info.id);
        this.queued = this.holding = false;
        h.waiters.drop(this.info.id);
        h.waiters.apply(h.scheduler.cancel(this.info.id, now()).decisions);
      }
      h.decisionLog.forget(this.info.id);
    }
  }

  private fail(status: number, message: string, code: string, extra?: Record<string, string>): void {
    this.status = status;
    // Errors carry the request id too; set per response rather than with setHeader (measurably cheaper).
    sendError(this.res, this.format, status, message, code, { 'x-request-id': this.rid, ...extra });
    this.host.metrics.countRequest('none', status);
    this.host.log.info({ status, code, ms: round(now() - this.t0) }, message);
    if (this.info !== undefined) this.captureTrace(undefined);
  }

  /** One line in the trace capture (`trace:` in the config), when one is configured. */
  private captureTrace(backend: string | undefined): void {
    const cap = this.host.capture;
    // Generation only: embeddings and model lookups are not work a replay can schedule.
    const api = cap && traceApiOf(this.route.endpoint);
    if (!cap || api === undefined) return;
    const e2eMs = now() - this.t0;
    cap.record({
      arrivalMs: Date.now() - e2eMs,
      model: this.parsed.model,
      api,
      promptText: this.parsed.promptText,
      promptTokens: this.promptTokens,
      outputTokens: this.outputTokens,
      maxTokens: this.parsed.maxTokens,
      sessionKey: this.info.sessionKey,
      backend,
      ttftMs: this.ttfbMs,
      e2eMs,
      status: this.status,
    });
  }

  /** Body read, checked and parsed; false when the flight already answered (or the client left). */
  private async readRequest(): Promise<boolean> {
    const { settings } = this.host;
    try {
      this.raw = await readBody(this.req, settings.server.maxBodyBytes);
    } catch (err) {
      if (err instanceof BodyTooLarge) {
        this.res.setHeader('connection', 'close');
        this.fail(413, `body over ${settings.server.maxBodyBytes} bytes`, 'body_too_large');
      }
      return false; // else the client went away while sending (or was cut for sending too slowly)
    }
    const depth = settings.server.maxJsonDepth ?? DEFAULT_MAX_JSON_DEPTH;
    if (jsonDepthExceeds(this.raw, depth)) {
      this.fail(400, `JSON body nested deeper than ${depth} levels`, 'body_too_deep');
      return false;
    }
    try {
      ({ body: this.body, parsed: this.parsed } = parseBody(this.route, this.raw));
    } catch (err) {
      if (!(err instanceof BadRequest)) throw err;
      this.fail(400, err.message, err.code);
      return false;
    }
    const known = this.host.scheduler.models();
    if (!known.has(this.parsed.model)) {
      // Backends whose models are not known yet may serve it: unavailable for now, not unknown.
      const pending = this.host.fleet.undiscovered();
      if (pending.length > 0) {
        // Names only: the reasons (addresses, errors) go to the log and the admin API.
        const why = pending.map((rt) => rt.config.name).join(', ');
        this.fail(
          503,
          `model '${this.parsed.model}' not available: model discovery has not succeeded on backend${pending.length > 1 ? 's' : ''} ${why}`,
          'model_unavailable',
          { 'retry-after': '1' },
        );
        return false;
      }
      const list = [...known].sort().join(', ');
      this.fail(
        404,
        `model '${this.parsed.model}' not found; available: ${list || '(none)'}`,
        'model_not_found',
      );
      return false;
    }
    this.info = {
      id: this.host.nextRequestId(),
      model: this.parsed.model,
      api: this.route.api,
      arrivedAt: this.t0,
      promptText: this.parsed.promptText,
      maxTokens: this.parsed.maxTokens,
      sessionKey: this.sessionKey(),
      taskHint: taskHintOf(this.req.headers[this.host.settings.server.taskHintHeader ?? TASK_HINT_HEADER]),
      priority: this.host.objectives.priority(
        this.host.settings.objectives,
        this.req.headers[OBJECTIVE_HEADER],
      ),
    };
    // Forward the client's headers as a flat raw list (no object rebuild), minus hop-by-hop ones.
    const rh = this.req.rawHeaders;
    const headers: string[] = [];
    for (let i = 0; i < rh.length; i += 2) {
      const k = rh[i]!.toLowerCase();
      if (!HOP_BY_HOP.has(k) && k !== 'x-request-id') headers.push(rh[i]!, rh[i + 1]!);
    }
    headers.push('x-request-id', this.rid);
    this.headers = headers;
    return true;
  }

  private sessionKey(): string | undefined {
    const sk = this.host.settings.sessionKey;
    const session = this.req.headers[sk?.header ?? 'x-session-token'];
    if (typeof session === 'string' && session !== '') return session;
    return sk && !(sk.bodyPath.length === 1 && sk.bodyPath[0] === 'user')
      ? bodyString(this.body, sk.bodyPath)
      : this.parsed.user;
  }

  private readonly onClose = (): void => {
    if (this.res.writableFinished) return;
    this.clientGone = true;
    this.exchange?.cancel();
    if (this.queued) {
      const h = this.host;
      this.queued = false;
      h.waiters.drop(this.info.id);
      h.federation?.unqueued(this.info.id);
      h.decisionLog.forget(this.info.id);
      h.waiters.apply(h.scheduler.cancel(this.info.id, now()).decisions);
    }
  };

  /**
   * Per-model quotas: over a target, wait here (not sent, not rejected); the lease is released
   * when the response closes. Checked first so requests for models without a quota pay nothing,
   * not even an await. False when the flight already answered (or the client left).
   */
  private async passQuota(): Promise<boolean> {
    const { admission, settings, log } = this.host;
    const model = this.parsed.model;
    if (!admission.hasQuota(model)) return true;
    const taskId = this.req.headers[TASK_ID_HEADER];
    if (typeof taskId === 'string' && (await leaseCovers(admission, taskId, model))) return true;
    const gate = await passGate(
      admission,
      model,
      estimateRequestTokens(this.parsed.promptText, this.parsed.maxTokens),
      this.res,
      () => this.clientGone,
      settings.queue.maxWaitMs,
      log,
    );
    if (gate.kind === 'go') return true;
    if (gate.kind === 'fail') {
      const extra = gate.retryAfterS !== undefined ? { 'retry-after': String(gate.retryAfterS) } : undefined;
      this.fail(gate.status, gate.message, gate.code, extra);
    }
    return false;
  }

  /**
   * Every local replica full and a peer available (SkyLB Algorithm 1): the request goes to the
   * peer router with the hop marker and its answer streams back. True when that settled the
   * request; false to run it here (local first, or the peer failed before any byte went out).
   */
  private async tryPeer(f: FederationHook): Promise<boolean> {
    const d = f.route(this.info, !this.mayForward());
    if (d.kind !== 'peer') return false;
    f.onForwarded(this.info, d.peer);
    return this.forwardTo(f, d);
  }

  /** Never a request that came from a peer (hop marker), nor one a peer already had. */
  private mayForward(): boolean {
    return !this.peerTried && this.req.headers[HOP_HEADER] === undefined;
  }

  /** Sends the request to the peer `d` names (already counted there); true when that settled it. */
  private async forwardTo(f: FederationHook, d: PeerRoute): Promise<boolean> {
    this.peerTried = true;
    const headers = Object.create(null) as Record<string, string>;
    for (let i = 0; i < this.headers.length; i += 2)
      headers[this.headers[i]!.toLowerCase()] = this.headers[i + 1]!;
    const ac = new AbortController();
    const abort = (): void => ac.abort();
    this.res.once('close', abort);
    const outcome = await forwardToPeer({
      url: d.url,
      method: 'POST',
      path: this.req.url ?? '/',
      headers,
      body: this.raw,
      res: this.res,
      signal: ac.signal,
      headersTimeoutMs: this.host.settings.timeouts.firstByteMs,
    });
    this.res.off('close', abort);
    // A client that left is not the peer's failure.
    f.onDone(d.peer, outcome === 'done' || this.clientGone);
    if (outcome === 'failed-before-bytes' && !this.clientGone) {
      this.host.log.warn(
        { rid: this.rid, peer: d.peer },
        'peer failed before answering: running the request here',
      );
      return false;
    }
    this.host.metrics.countRequest(`peer:${d.peer}`, this.res.statusCode);
    this.host.log.info(
      { rid: this.rid, peer: d.peer, outcome, ms: round(now() - this.t0) },
      'forwarded to peer',
    );
    return true;
  }

  /** Try backends (each at most once) until one answers; answer the client either way. */
  private async dispatchLoop(): Promise<void> {
    const h = this.host;
    if (h.federation && (await this.tryPeer(h.federation))) return;
    const attempts = h.settings.retry.attempts;
    let tried: Set<string> | undefined; // made on the first dispatch: most requests never retry
    let last: RetryResult | undefined;
    let saturatedAll = true;
    let backend = 'none';
    for (let attempt = 0; attempt < attempts; attempt++) {
      if (attempt > 0) {
        await sleep(backoffMs(attempt, h.settings.retry.backoffMs, 2000, Math.random()));
        if (this.clientGone) break;
      }
      const queuedFrom = now();
      const exclude = this.excluded(tried, queuedFrom);
      const next = this.schedule(exclude);
      const d = next instanceof Promise ? await next : next;
      if ('kind' in d) {
        // A peer freed up while it waited in the router queue: its place there is given back.
        if (await this.forwardTo(h.federation!, d)) return;
        attempt--; // the peer failed before answering: this attempt runs here after all
        continue;
      }
      if (!this.noteDecision(d, attempt, queuedFrom)) break;
      if (d.type === 'reject') {
        if (this.answerReject(d.reason, exclude, tried, last !== undefined)) return;
        break; // retries exhausted the eligible backends: report the upstream error
      }
      backend = d.backend;
      (tried ??= new Set()).add(backend);
      const r = await this.attempt(backend);
      if (r.kind !== 'retry') {
        this.finishLog(backend, attempt + 1);
        return;
      }
      last = r;
      if (!r.saturated) saturatedAll = false;
      if (!this.clientGone) {
        h.metrics.retries.inc({ backend });
        h.stats.record({ backend, at: Date.now(), ok: false, latencyMs: now() - this.t0, error: r.error });
      }
    }
    this.answerFailure(backend, tried?.size ?? 0, last, saturatedAll);
  }

  /**
   * Logs the decision (debug explanation, /admin/decisions); false when the client left while it
   * was being made (nothing more to do).
   */
  private noteDecision(d: Decision, attempt: number, queuedFrom: number): boolean {
    const h = this.host;
    const scores = h.decisionLog.take(this.info.id);
    if (scores && h.log.isLevelEnabled('debug'))
      h.log.debug({ rid: this.rid, model: this.parsed.model, attempt: attempt + 1, ...scores }, 'decision');
    if (this.clientGone) return false;
    h.decisionLog.record({
      atMs: Date.now(), // formatted only when read: toISOString per request is measurable
      requestId: this.rid,
      model: this.parsed.model,
      policy: h.scheduler.policyName,
      backend: d.type === 'dispatch' ? d.backend : null,
      outcome: d.type,
      // Absent fields as undefined (JSON drops them), not spreads: one object per decision.
      reason: d.type === 'reject' ? d.reason : undefined,
      queuedMs: round(now() - queuedFrom),
      attempt: attempt + 1,
      class: d.type === 'dispatch' ? h.decisionLog.classOf(this.info.id, d.backend) : null,
      scores,
    });
    return true;
  }

  /**
   * The scheduler refused the request: answer it (true), or false after an upstream error, which
   * is then what the client is told.
   */
  private answerReject(
    reason: RejectReason,
    exclude: ReadonlySet<string>,
    tried: ReadonlySet<string> | undefined,
    upstreamFailed: boolean,
  ): boolean {
    if (reason === 'no-backend' && this.onlyCoolingLeft(exclude, tried)) {
      // Every backend left is resting after a 429: say when to come back.
      this.fail(429, `every backend serving '${this.parsed.model}' is saturated`, 'saturated', {
        'retry-after': String(this.host.cooldowns.retryAfterS(now())),
      });
      return true;
    }
    if (upstreamFailed) return false;
    const msg =
      reason === 'no-backend'
        ? `no healthy backend serves model '${this.parsed.model}'`
        : reason === 'queue-full'
          ? 'router queue is full'
          : 'timed out waiting in the router queue';
    this.fail(503, msg, reason.replace('-', '_'), { 'retry-after': '1' });
    return true;
  }

  /** No attempt answered: the client left (499), every backend was full (429), or they failed. */
  private answerFailure(
    backend: string,
    n: number,
    last: RetryResult | undefined,
    saturatedAll: boolean,
  ): void {
    if (this.clientGone) {
      this.status = 499;
      this.finishLog(backend, n);
      return;
    }
    if (last && saturatedAll)
      return this.fail(429, `every backend tried is saturated (${n} attempt(s))`, 'saturated', {
        'retry-after': String(this.host.cooldowns.retryAfterS(now())),
      });
    const timeout = last?.timeout === true;
    this.fail(
      timeout ? 504 : 502,
      `upstream failed after ${n} attempt(s): ${last?.error ?? 'no backend'}`,
      timeout ? 'upstream_timeout' : 'upstream_error',
    );
  }

  /** Backends this try must avoid: those tried, plus those resting after a 429 (and see show-route.ts). */
  private excluded(tried: Set<string> | undefined, t: number): ReadonlySet<string> {
    const cooling = this.host.cooldowns.cooling(t);
    let out: ReadonlySet<string> = tried ?? NONE_TRIED;
    if (cooling) {
      const s = new Set(cooling);
      if (tried) for (const b of tried) s.add(b);
      out = s;
    }
    if (this.route.body !== 'show') return out;
    const avoid = showAvoids(this.host.scheduler.backendViews(), this.parsed.model, out);
    return avoid.length === 0 ? out : new Set([...out, ...avoid]);
  }

  /** Whether some backend that could serve this request is excluded only because it is cooling. */
  private onlyCoolingLeft(exclude: ReadonlySet<string>, tried: ReadonlySet<string> | undefined): boolean {
    if (exclude === tried || exclude === NONE_TRIED) return false;
    for (const name of exclude) {
      if (tried?.has(name)) continue;
      const b = this.host.scheduler.backend(name);
      if (b && b.healthy && !b.draining && b.models.has(this.parsed.model)) return true;
    }
    return false;
  }

  /**
   * Submits the request: its decision when the scheduler makes it at once (the common case: no
   * promise, no waiter), else a promise of it while it waits in the router queue — or of the peer
   * that took it from there.
   */
  private schedule(exclude: ReadonlySet<string>): Decision | Promise<Decision | PeerRoute> {
    const h = this.host;
    const t = now();
    h.decisionLog.rearm(t);
    const id = this.info.id;
    h.waiters.submitting = id;
    let ds: Decision[];
    try {
      ds = h.scheduler.submit(this.info, t, exclude);
    } finally {
      h.waiters.submitting = undefined;
    }
    h.waiters.apply(ds); // wakes others this submit let go (ours has no waiter yet)
    for (const d of ds)
      if (d.request.id === id) {
        this.holding = d.type === 'dispatch';
        return d;
      }
    this.queued = true;
    const f = h.federation && this.mayForward() ? h.federation : undefined;
    const decided = h.waiters.wait(id).then((d) => {
      this.queued = false;
      this.holding = d.type === 'dispatch';
      f?.unqueued(id);
      return d;
    });
    if (!f) return decided;
    // A peer freeing up may take it from the queue first (Algorithm 1 at the queue head).
    const taken = new Promise<PeerRoute>((resolve) =>
      f.queued(this.info, (route) => {
        // Still undecided (a decision already made but not yet delivered has no waiter left).
        if (!this.queued || this.clientGone || !h.waiters.awaits(id)) return false;
        this.queued = false;
        h.waiters.drop(id); // `decided` never settles now
        h.waiters.apply(h.scheduler.cancel(id, now()).decisions);
        resolve(route);
        return true;
      }),
    );
    return Promise.race([decided, taken]);
  }

  /** One try on one backend. Gives the scheduler slot back exactly once, on every path. */
  private attempt(backend: string): Promise<AttemptResult> {
    const h = this.host;
    const dispatchedAt = now();
    let settled = false;
    const settle = (ok: boolean, usage: Usage, firstByteAt: number | undefined): void => {
      if (settled) return;
      settled = true;
      this.holding = false;
      const t = now();
      const report: CompletionReport = {
        ok,
        dispatchedAt,
        firstByteAt,
        firstByteIsWholeAnswer: !this.parsed.stream,
        finishedAt: t,
        promptTokens: usage.promptTokens,
        completionTokens: usage.completionTokens,
        promptEvalMs: usage.promptEvalMs,
        evalMs: usage.evalMs,
        cachedTokens: usage.cachedTokens,
      };
      if (ok) {
        this.outputTokens = usage.completionTokens;
        this.promptTokens = usage.promptTokens;
        // A whole (non-streamed) answer's first byte is its end: no time to first token to show.
        if (firstByteAt !== undefined && this.parsed.stream) this.ttfbMs = firstByteAt - this.info.arrivedAt;
      }
      h.waiters.apply(h.scheduler.complete(this.info.id, report, t));
      if (ok) {
        const m = h.metrics.of(backend);
        m.upstreamSeconds.observe((t - dispatchedAt) / 1000);
        if (firstByteAt !== undefined) m.ttfbSeconds.observe((firstByteAt - dispatchedAt) / 1000);
      }
    };
    try {
      return this.exchangeWith(backend, dispatchedAt, settle);
    } catch (err) {
      // Anything that throws before the exchange owns the slot (a translation that cannot cope
      // with the body) gives it back here, and the request fails cleanly.
      settle(false, {}, undefined);
      h.log.error({ err, rid: this.rid, backend }, 'attempt failed before dispatch');
      return Promise.resolve({
        kind: 'retry',
        error: `${backend}: request could not be prepared: ${(err as Error).message}`,
        timeout: false,
        saturated: false,
      });
    }
  }

  private exchangeWith(
    backend: string,
    dispatchedAt: number,
    settle: (ok: boolean, usage: Usage, firstByteAt: number | undefined) => void,
  ): Promise<AttemptResult> {
    const h = this.host;
    const rt = h.fleet.get(backend);
    if (!rt) {
      settle(false, {}, undefined);
      return Promise.resolve({
        kind: 'retry',
        error: `backend '${backend}' was removed`,
        timeout: false,
        saturated: false,
      });
    }
    const tr = upstreamTranslation(
      this.route.translate,
      { api: rt.config.api, responsesApi: rt.responsesApi, messagesApi: rt.messagesApi },
      this.body,
      this.parsed.stream,
    );
    if (tr?.local !== undefined) {
      // The router answers itself (count_tokens on a backend without it): nothing goes upstream.
      this.status = 200;
      this.res.writeHead(200, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(tr.local.body),
        'x-llmlb-backend': backend,
        'x-request-id': this.rid,
        ...tr.local.headers,
      });
      this.res.end(tr.local.body);
      settle(true, {}, undefined);
      return Promise.resolve(DONE);
    }
    // An OpenAI stream forwarded as it came: ask for its usage if the client did not (stream-usage.ts).
    let body: Buffer | string | null = tr ? (tr.body ?? null) : this.raw;
    let usageScan: 'drop' | 'count' | undefined;
    if (
      tr === undefined &&
      this.parsed.stream &&
      this.route.api === 'openai' &&
      this.route.body === undefined
    ) {
      const plan = usagePlan(this.raw, this.body, rt.config.streamUsage !== false);
      if (plan.body !== undefined) body = plan.body;
      if (plan.scan !== 'none') usageScan = plan.scan;
    }
    return new Promise<AttemptResult>((resolve) => {
      const ex = new UpstreamExchange(
        this.res,
        {
          backend,
          requestId: this.rid,
          format: this.format,
          usage: this.route.endpoint.usage,
          stream: this.parsed.stream,
          model: this.parsed.model,
          translation: tr,
          arrivedAt: this.info.arrivedAt,
          usageScan,
        },
        now,
        (end: ExchangeEnd) => resolve(this.attemptEnded(backend, ex, end, settle)),
      );
      this.exchange = ex;
      h.attempts.add(backend, ex);
      h.stalls.track(backend, ex, dispatchedAt, {
        streamed: this.parsed.stream,
        maxTokens: this.parsed.maxTokens,
      });
      try {
        rt.pool.dispatch(
          {
            path: rt.basePath + (tr?.path ?? this.route.upstreamPath),
            method: tr?.method ?? 'POST',
            headers: tr ? withJsonContentType(this.headers) : this.headers,
            body,
            headersTimeout: h.settings.timeouts.firstByteMs,
            bodyTimeout: h.settings.timeouts.idleMs,
          },
          ex,
        );
      } catch (err) {
        ex.onError(err as Error); // a pool closed under us: ends the exchange as retryable
      }
    });
  }

  /** An exchange ended: its slot is given back (settle) and the attempt's result told apart. */
  private attemptEnded(
    backend: string,
    ex: UpstreamExchange,
    end: ExchangeEnd,
    settle: (ok: boolean, usage: Usage, firstByteAt: number | undefined) => void,
  ): AttemptResult {
    const h = this.host;
    this.exchange = undefined;
    h.attempts.delete(backend, ex);
    const t = now();
    const done = end.kind === 'done';
    h.stalls.untrack(
      backend,
      ex,
      t,
      done || ex.firstByteAt !== undefined,
      done && end.ok ? end.usage.completionTokens : undefined,
    );
    if (end.kind === 'done') {
      this.status = ex.status;
      if (end.ok) h.fleet.recordSuccess(backend);
      settle(end.ok, end.usage, ex.firstByteAt);
      return DONE;
    }
    settle(false, {}, ex.firstByteAt);
    if (end.kind === 'over') {
      if (this.clientGone) this.status = 499;
      else {
        this.status = 502;
        h.fleet.recordFailure(backend, end.reason ?? 'failed');
      }
      return OVER;
    }
    if (this.clientGone) return OVER;
    const saturated = end.status === 429;
    // A 429 is the backend saying it is full, not that it is broken: it rests instead.
    if (saturated) h.cooldowns.cool(backend, t, parseRetryAfter(end.retryAfter, Date.now()));
    else h.fleet.recordFailure(backend, end.reason);
    return { kind: 'retry', error: `${backend}: ${end.reason}`, timeout: end.timeout, saturated };
  }

  private finishLog(backend: string, attempts: number): void {
    const h = this.host;
    h.metrics.countRequest(backend, this.status);
    this.captureTrace(backend === 'none' ? undefined : backend);
    // A client that left is not the backend's failure; 'none' is no backend at all.
    // Embeddings and model lookups generate nothing: no token count (not 0, not unknown).
    const generation = traceApiOf(this.route.endpoint) !== undefined;
    if (this.status !== 499 && backend !== 'none')
      h.stats.record({
        backend,
        at: Date.now(),
        ok: this.status > 0 && this.status < 400,
        latencyMs: now() - this.t0,
        ttfbMs: this.ttfbMs,
        outputTokens: generation ? this.outputTokens : undefined,
        generation,
        error: this.status >= 400 ? `status ${this.status}` : undefined,
      });
    // Build the log record only when it will be written.
    if (!h.log.isLevelEnabled('info')) return;
    h.log.info(
      {
        rid: this.rid,
        path: this.route.upstreamPath,
        model: this.parsed.model,
        backend,
        status: this.status,
        stream: this.parsed.stream,
        attempts,
        ms: round(now() - this.t0),
        ...(h.settings.log.prompts ? { prompt: this.parsed.promptText } : {}),
      },
      'request',
    );
  }
}

/** A raw header list with its content-type replaced by JSON (the translated body is JSON). */
function withJsonContentType(raw: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2)
    if (raw[i]!.toLowerCase() !== 'content-type') out.push(raw[i]!, raw[i + 1]!);
  out.push('content-type', 'application/json');
  return out;
}

const round = (ms: number): number => Math.round(ms * 100) / 100;

/** A string (or number) at a dotted path of a JSON body, for a configured session key field. */
function bodyString(body: Record<string, unknown>, path: readonly string[]): string | undefined {
  let v: unknown = body;
  for (const k of path) {
    if (typeof v !== 'object' || v === null || Array.isArray(v) || !Object.hasOwn(v, k)) return undefined;
    v = (v as Record<string, unknown>)[k];
  }
  if (typeof v === 'string') return v === '' ? undefined : v;
  return typeof v === 'number' && Number.isFinite(v) ? String(v) : undefined;
}
