/**
 * The live fleet: each backend's connection pools, health (passive ejection, active probes that
 * re-admit, quarantine), model discovery and capability checks, and its engine metrics scraped
 * for the scheduler. Reading a backend's answers is beside it: its URL (`backend-url.ts`), its
 * model listing (`model-list.ts`), its metrics pages (`engine-metrics.ts`).
 */
import { Pool } from 'undici';
import type { Logger } from 'pino';
import type { Scheduler } from '../core/scheduler.js';
import type { BackendEntry } from '../config/schema.js';
import type { Decision, EngineCacheInfo } from '../core/types.js';
import { llamaPropsOf, parseEngineMetrics, parseOllamaPs } from './engine-metrics.js';
import { parseBackendUrl } from './backend-url.js';
import { parseModelList, syntheticTag } from './model-list.js';

/** A backend as configured (the config module's normalized entry). */
export type BackendConfig = BackendEntry;

export interface FleetOptions {
  readonly connectMs: number;
  readonly probeIntervalMs: number;
  readonly probeTimeoutMs: number;
  /** How often engine load (running / waiting / KV) is scraped from backends that export it. */
  readonly scrapeIntervalMs: number;
  readonly failuresToEject: number;
  readonly refreshMs: number;
  /** How long a backend found stuck stays out even while its probe answers (default 30 s). */
  readonly quarantineMs?: number;
}

/** Where a backend came from: hot reload leaves discovered ones to their discovery. */
export type BackendOrigin = 'config' | 'admin' | 'discovery';

/** An Ollama /api/tags entry, kept as the backend returned it so /api/tags can show the union. */
export type TagEntry = Readonly<Record<string, unknown>> & { readonly name: string };

/** What the live host keeps per backend beside the core's view: the connection pool and health. */
export interface BackendRuntime {
  config: BackendConfig;
  /** Who added it: the config file (and hot reload), the admin API, or Kubernetes discovery. */
  readonly origin: BackendOrigin;
  /** The URL's path prefix, put in front of every upstream path ('' for none; `/v1` understood for OpenAI). */
  readonly basePath: string;
  /** Generation traffic. Unlimited connections: the scheduler's caps decide how many go at once. */
  readonly pool: Pool;
  /**
   * Probes, discovery and metric scrapes, on connections of their own: behind a busy traffic pool
   * they would queue, time out, and get a working backend ejected.
   */
  readonly control: Pool;
  /** Consecutive failures (requests and probes); reset by any success. */
  failures: number;
  tags: TagEntry[];
  version: string | undefined;
  lastError: string | undefined;
  lastErrorAt: number | undefined;
  /** Host time of the last successful model discovery. */
  discoveredAt: number | undefined;
  /** false once the backend showed it has no engine metrics page (plain Ollama): stop asking. */
  hasMetrics: boolean | undefined;
  /** false once /api/ps proved absent (not Ollama) or useless. */
  hasPs: boolean | undefined;
  /** Host time /api/ps was last read. */
  psAt: number | undefined;
  /**
   * llama.cpp's /props, read once after the first metrics page: its slot caches (null: the backend
   * has no such page or it says nothing of slots; undefined: not asked yet).
   */
  props: EngineCacheInfo | null | undefined;
  scraping: boolean;
  /**
   * Whether it answers POST /v1/responses itself (learned once, after its first good probe);
   * until known, Responses requests are translated to chat completions, which every backend has.
   */
  responsesApi: boolean | undefined;
  checkingResponses: boolean;
  /** Whether it answers POST /v1/messages (Anthropic) itself; learned as responsesApi is. */
  messagesApi: boolean | undefined;
  checkingMessages: boolean;
  /** Host time before which probes may not re-admit it (it hung while its probe answered). */
  quarantinedUntil: number;
  /** Whether the last probe answered (undefined before the first): state changes are logged. */
  reachable: boolean | undefined;
  /** Why the backend does not serve, with a hint when it answers the other API; undefined when it does. */
  problem: string | undefined;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The live fleet: one undici Pool per backend (keep-alive), model discovery, passive ejection
 * after consecutive failures, and active probes that re-admit. Health changes go to the
 * scheduler; the decisions it returns go to `apply`.
 */
export class Fleet {
  private readonly backends = new Map<string, BackendRuntime>();
  private timers: NodeJS.Timeout[] = [];
  /** Set by close(): failures after it (requests cut by destroying the pools) eject nothing. */
  private closing = false;
  private scrapeTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly scheduler: Scheduler,
    private readonly opts: FleetOptions,
    private readonly log: Logger,
    private readonly apply: (ds: Decision[]) => void,
    private readonly onEject: (name: string) => void,
    private readonly now: () => number,
  ) {}

  get(name: string): BackendRuntime | undefined {
    return this.backends.get(name);
  }

  all(): BackendRuntime[] {
    return [...this.backends.values()];
  }

  /** Add a backend; with no configured models it is discovered before taking traffic. */
  async add(config: BackendConfig, origin: BackendOrigin = 'config'): Promise<void> {
    if (this.backends.has(config.name)) throw new Error(`backend '${config.name}' already exists`);
    // The config schema refused what cannot be parsed; this split is what undici needs (origin only).
    const addr = parseBackendUrl(config.url, config.api);
    if (!addr.ok) throw new Error(`backend '${config.name}': url ${addr.problem}`);
    const pool = new Pool(addr.origin, {
      // A fixed cap here held requests the scheduler counted as sent in undici's own queue.
      connections: null,
      pipelining: 1,
      connect: { timeout: this.opts.connectMs },
      keepAliveTimeout: 30_000,
    });
    const control = new Pool(addr.origin, {
      connections: 2,
      pipelining: 1,
      connect: { timeout: this.opts.connectMs },
      keepAliveTimeout: 30_000,
    });
    const rt: BackendRuntime = {
      config,
      origin,
      basePath: addr.basePath,
      pool,
      control,
      failures: 0,
      tags: [],
      version: undefined,
      lastError: undefined,
      lastErrorAt: undefined,
      discoveredAt: undefined,
      hasMetrics: undefined,
      hasPs: undefined,
      psAt: undefined,
      props: undefined,
      scraping: false,
      responsesApi: undefined,
      checkingResponses: false,
      messagesApi: undefined,
      checkingMessages: false,
      quarantinedUntil: 0,
      reachable: undefined,
      problem: undefined,
    };
    this.backends.set(config.name, rt);
    // Not healthy until a first probe answers: a backend that refuses connections must not show
    // healthy (and take traffic) until enough requests have failed on it.
    this.scheduler.addBackend(
      {
        name: config.name,
        api: config.api,
        models: config.models ?? [],
        maxConcurrency: config.maxConcurrency,
        weight: config.weight,
        region: config.region,
      },
      false,
    );
    if (config.models) rt.tags = config.models.map((m) => syntheticTag(m));
    await this.probe(rt);
  }

  /**
   * Backends configured without `models:` whose discovery has not succeeded yet: the models they
   * serve are unknown, so a request for an unknown model may be theirs (503, not 404).
   */
  undiscovered(): BackendRuntime[] {
    return this.all().filter((rt) => rt.config.models === undefined && rt.discoveredAt === undefined);
  }

  /** Remove a backend: it takes nothing new; its pool closes once in-flight requests finish. */
  remove(name: string): void {
    const rt = this.backends.get(name);
    if (!rt) throw new Error(`unknown backend '${name}'`);
    this.backends.delete(name);
    this.apply(this.scheduler.removeBackend(name, this.now()));
    rt.pool.close().catch(() => undefined);
    rt.control.close().catch(() => undefined);
  }

  /** Probe, scrape and checks settle their own failures; what escapes them is a bug worth a log line. */
  #bug(rt: BackendRuntime, what: string, err: unknown): void {
    this.log.error({ err, backend: rt.config.name }, `${what} failed unexpectedly`);
  }

  start(): void {
    const probeAll = (): void => {
      for (const rt of this.backends.values())
        this.probe(rt).catch((err: unknown) => this.#bug(rt, 'probe', err));
    };
    this.timers.push(setInterval(probeAll, this.opts.probeIntervalMs).unref());
    const scrapeAll = (): void => {
      // One scrape at a time per backend: a slow engine must not pile up requests at short intervals.
      for (const rt of this.backends.values())
        if ((rt.hasMetrics !== false || rt.hasPs !== false) && !rt.scraping)
          this.scrape(rt).catch((err: unknown) => this.#bug(rt, 'scrape', err));
    };
    // Rescheduled each time: a policy swapped in at run time may want metrics faster (SP-P: 50 ms).
    const next = (): void => {
      const ms = Math.min(this.opts.scrapeIntervalMs, this.scheduler.metricsIntervalMs ?? Infinity);
      this.scrapeTimer = setTimeout(() => {
        scrapeAll();
        next();
      }, ms).unref();
    };
    next();
  }

  /**
   * Engine load: vLLM / SGLang-style /metrics (running, waiting, KV usage) and, for Ollama
   * backends, /api/ps (loaded models; batch state too from the emulated engine). A backend that
   * answers neither is not asked again.
   */
  private async scrape(rt: BackendRuntime): Promise<void> {
    rt.scraping = true;
    // The engine's counts are as of when it answered; the router's own pushes after that are credited.
    try {
      if (rt.hasMetrics !== false) {
        const text = await this.fetchPage(rt, '/metrics');
        let m = text === undefined ? undefined : parseEngineMetrics(text, this.now());
        rt.hasMetrics = m !== undefined;
        // A page without the cache's size may belong to llama.cpp, whose /props says it (static: asked once).
        if (m !== undefined && m.cache === undefined && rt.props === undefined) {
          // Unreachable now (false): this scrape's metrics still count, and it is asked again next time.
          const props = await this.fetchPage(rt, '/props').catch(() => false as const);
          if (props !== false) rt.props = props === undefined ? null : llamaPropsOf(props);
        }
        if (m !== undefined && m.cache === undefined && rt.props) m = { ...m, cache: rt.props };
        if (m) this.scheduler.setMetrics(rt.config.name, m);
        if (m?.lora) this.learnAdapters(rt, m.lora.running, m.lora.waiting);
      }
      // Which models are loaded changes in seconds: /api/ps is read at the health scrape interval,
      // not at a selective-pushing policy's 50 ms, unless it is the backend's only load source.
      const psDue =
        rt.hasMetrics !== true || rt.psAt === undefined || this.now() - rt.psAt >= this.opts.scrapeIntervalMs;
      if (rt.config.api === 'ollama' && rt.hasPs !== false && psDue) {
        rt.psAt = this.now();
        const text = await this.fetchPage(rt, '/api/ps');
        let ps: ReturnType<typeof parseOllamaPs>;
        try {
          ps = text === undefined ? undefined : parseOllamaPs(JSON.parse(text), this.now());
        } catch {
          ps = undefined;
        }
        rt.hasPs = ps !== undefined;
        if (ps) {
          this.scheduler.setLoadedModels(rt.config.name, ps.loadedModels);
          if (!rt.hasMetrics && ps.metrics) this.scheduler.setMetrics(rt.config.name, ps.metrics);
        }
      }
      // Metric-driven policies (selective pushing on pending requests) may now release held requests.
      if (rt.hasMetrics || rt.hasPs) this.apply(this.scheduler.pump(this.now()));
    } catch {
      // Unreachable: health probes deal with that; try again next time.
    } finally {
      rt.scraping = false;
    }
  }

  /** GET a small page; undefined unless 200. Throws on network errors. */
  private async fetchPage(
    rt: BackendRuntime,
    path: string,
    basePath = rt.basePath,
  ): Promise<string | undefined> {
    const res = await rt.control.request({
      path: basePath + path,
      method: 'GET',
      headersTimeout: this.opts.probeTimeoutMs,
      bodyTimeout: this.opts.probeTimeoutMs,
    });
    const text = await res.body.text();
    return res.statusCode === 200 ? text : undefined;
  }

  async close(): Promise<void> {
    // Requests cut by the pools' destruction below are our doing, not the backends' failures.
    this.closing = true;
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    clearTimeout(this.scrapeTimer);
    this.scrapeTimer = undefined;
    await Promise.all(
      [...this.backends.values()].flatMap((rt) => [
        rt.pool.destroy().catch(() => undefined),
        rt.control.destroy().catch(() => undefined),
      ]),
    );
  }

  recordSuccess(name: string): void {
    const rt = this.backends.get(name);
    if (rt) rt.failures = 0;
  }

  /** A request or probe failed: count it, eject the backend at the threshold. */
  recordFailure(name: string, error: string): void {
    const rt = this.backends.get(name);
    if (!rt || this.closing) return;
    rt.failures++;
    rt.lastError = error;
    rt.lastErrorAt = Date.now();
    const view = this.scheduler.backend(name);
    if (view?.healthy && rt.failures >= this.opts.failuresToEject) {
      this.log.warn({ backend: name, failures: rt.failures, error }, 'backend ejected');
      // Out first: what onEject does (giving up its requests) must see it ejected.
      this.apply(this.scheduler.setHealth(name, false, this.now()));
      this.onEject(name);
    }
  }

  /**
   * The backend hangs while answering probes: take it out now, and let probes re-admit it only
   * after the quarantine (a probe that answers proves nothing about generation).
   */
  quarantine(name: string, reason: string): void {
    const rt = this.backends.get(name);
    if (!rt) return;
    rt.lastError = reason;
    rt.lastErrorAt = Date.now();
    rt.quarantinedUntil = this.now() + (this.opts.quarantineMs ?? 30_000);
    if (this.scheduler.backend(name)?.healthy) {
      this.log.warn({ backend: name, reason }, 'backend ejected: stuck');
      this.apply(this.scheduler.setHealth(name, false, this.now()));
      this.onEject(name);
    }
  }

  /**
   * Probe one backend: Ollama GET /api/tags (or /api/version when models are configured),
   * OpenAI GET /v1/models. Success refreshes discovered models and re-admits the backend.
   */
  async probe(rt: BackendRuntime): Promise<void> {
    const { config } = rt;
    // Discovery rides on the probe, but only every refreshMs: /api/tags is heavier than /api/version.
    const discover =
      config.models === undefined &&
      (rt.discoveredAt === undefined || this.now() - rt.discoveredAt >= this.opts.refreshMs);
    const path = config.api === 'openai' ? '/v1/models' : discover ? '/api/tags' : '/api/version';
    let status: number | undefined; // set once the backend answered (a refusal, or a body that is not JSON)
    try {
      const res = await rt.control.request({
        path: rt.basePath + path,
        method: 'GET',
        headersTimeout: this.opts.probeTimeoutMs,
        bodyTimeout: this.opts.probeTimeoutMs,
        signal: AbortSignal.timeout(this.opts.probeTimeoutMs),
      });
      const text = await res.body.text();
      status = res.statusCode;
      if (status !== 200) throw new Error(`GET ${path} answered ${status}`);
      const body: unknown = JSON.parse(text); // not JSON: something else answers there
      if (this.backends.get(config.name) !== rt) return; // removed meanwhile
      if (discover) {
        const first = rt.discoveredAt === undefined;
        const models = this.applyDiscovery(rt, body);
        rt.discoveredAt = this.now();
        if (first || models.length === 0)
          this.log[models.length === 0 ? 'warn' : 'info'](
            { backend: config.name, models },
            models.length === 0 ? `backend lists no models (GET ${path})` : 'backend models discovered',
          );
      }
      // Back up: logged as 'backend healthy' once re-admitted below.
      rt.reachable = true;
      rt.problem = undefined;
      if (path === '/api/version' && isObj(body) && typeof body.version === 'string')
        rt.version = body.version;
      rt.failures = 0;
      if (rt.responsesApi === undefined && !rt.checkingResponses)
        this.checkResponses(rt).catch((err: unknown) => this.#bug(rt, 'responses check', err));
      if (rt.messagesApi === undefined && !rt.checkingMessages)
        this.checkMessages(rt).catch((err: unknown) => this.#bug(rt, 'messages check', err));
      if (!this.scheduler.backend(config.name)?.healthy && this.now() >= rt.quarantinedUntil) {
        this.log.info({ backend: config.name }, 'backend healthy');
        this.apply(this.scheduler.setHealth(config.name, true, this.now()));
      }
    } catch (err) {
      if (this.backends.get(config.name) !== rt) return;
      const reason = `probe ${path}: ${(err as Error).message}`;
      if (rt.reachable !== false) {
        // Logged once at start and once per up → down change, not on every failed probe.
        rt.reachable = false;
        const hint = status === undefined ? undefined : await this.otherApiHint(rt);
        if (this.backends.get(config.name) !== rt) return;
        rt.problem = hint === undefined ? reason : `${reason}; ${hint}`;
        this.log.warn(
          { backend: config.name, url: config.url, api: config.api, reason, ...(hint ? { hint } : {}) },
          status === undefined ? 'backend unreachable' : `backend probe failed${hint ? `; ${hint}` : ''}`,
        );
      }
      this.recordFailure(config.name, reason);
    }
  }

  /**
   * A probe refused by the backend (404 and the like): does it answer the other API? vLLM with
   * `api:` left out (ollama by default) is the usual case. The hint, or undefined.
   */
  private async otherApiHint(rt: BackendRuntime): Promise<string | undefined> {
    const other = rt.config.api === 'openai' ? 'ollama' : 'openai';
    const path = other === 'openai' ? '/v1/models' : '/api/tags';
    // The URL read as the other API would: `http://vllm:8000/v1` with `api:` left out is the classic.
    const alt = parseBackendUrl(rt.config.url, other);
    try {
      const text = await this.fetchPage(rt, path, alt.ok ? alt.basePath : rt.basePath);
      const body: unknown = text === undefined ? undefined : JSON.parse(text);
      const list = isObj(body) ? (other === 'openai' ? body.data : body.models) : undefined;
      return Array.isArray(list)
        ? `answers the ${other === 'openai' ? 'OpenAI' : 'Ollama'} API; set \`api: ${other}\``
        : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * Does the backend serve /v1/responses? An empty body is refused with a 400 where the route
   * exists (no generation runs) and with a 404/405 where it does not. Asked once per backend.
   */
  private async checkResponses(rt: BackendRuntime): Promise<void> {
    rt.checkingResponses = true;
    try {
      const served = await this.servesPost(rt, '/v1/responses');
      if (served !== undefined) rt.responsesApi = served;
    } finally {
      rt.checkingResponses = false;
    }
  }

  /** Does the backend serve Anthropic's /v1/messages (Ollama ≥ 0.14, llama.cpp, SGLang)? As above. */
  private async checkMessages(rt: BackendRuntime): Promise<void> {
    rt.checkingMessages = true;
    try {
      const served = await this.servesPost(rt, '/v1/messages');
      if (served !== undefined) rt.messagesApi = served;
    } finally {
      rt.checkingMessages = false;
    }
  }

  /** An empty-body POST: true when refused as a bad body, false when the route is missing, undefined unknown. */
  private async servesPost(rt: BackendRuntime, path: string): Promise<boolean | undefined> {
    try {
      const res = await rt.control.request({
        path: rt.basePath + path,
        method: 'POST',
        // Marked as a probe: an engine's logs (and a counting proxy in front of it) can tell this
        // empty, refused body from a generation request.
        headers: { 'content-type': 'application/json', 'x-llmlb-probe': 'route' },
        body: '{}',
        headersTimeout: this.opts.probeTimeoutMs,
        bodyTimeout: this.opts.probeTimeoutMs,
      });
      await res.body.dump();
      const s = res.statusCode;
      if (s === 404 || s === 405 || s === 501) return false;
      return s < 500 ? true : undefined;
    } catch {
      return undefined; // unreachable now: the next good probe asks again
    }
  }

  /**
   * Adapters the engine's vllm:lora_requests_info names among the backend's models (configured
   * ones are not discovered from /v1/models) become its adapters.
   */
  private learnAdapters(rt: BackendRuntime, ...lists: (readonly string[])[]): void {
    const view = this.scheduler.backend(rt.config.name);
    if (!view) return;
    const known = view.adapters;
    const fresh: string[] = [];
    for (const list of lists)
      for (const a of list)
        if (view.models.has(a) && known?.has(a) !== true && !fresh.includes(a)) fresh.push(a);
    if (fresh.length === 0) return;
    const adapters = [...(known ?? []), ...fresh];
    this.apply(this.scheduler.updateBackend(rt.config.name, { adapters }, this.now()));
  }

  /** The models the backend lists, now routed to it; returns their names. */
  private applyDiscovery(rt: BackendRuntime, body: unknown): string[] {
    const { tags, names, adapters } = parseModelList(rt.config.api, body);
    rt.tags = tags;
    const view = this.scheduler.backend(rt.config.name);
    const before = view?.models;
    const had = view?.adapters;
    const sameAdapters = (had?.size ?? 0) === adapters.length && adapters.every((a) => had?.has(a) === true);
    if (!before || before.size !== names.length || names.some((n) => !before.has(n)) || !sameAdapters) {
      this.apply(this.scheduler.updateBackend(rt.config.name, { models: names, adapters }, this.now()));
    }
    return names;
  }
}
