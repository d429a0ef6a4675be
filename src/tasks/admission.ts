import { request } from 'undici';

/** `POST /schedule` answers, the quota-aware router's field names. */
export type ScheduleResult =
  { readonly wait_for_ms: number } | { readonly model_backend_id: string; readonly task_id: string };

export interface Advice {
  readonly backpressure_score: number;
  readonly suggested_parallelism: number;
}

/** What the solver asks before each model call; the router's admission API or an in-process one. */
export interface Admission {
  schedule(estimatedTokens: number, model?: string): Promise<ScheduleResult>;
  /** Keeps the lease alive during a long call; false when the router no longer knows it. */
  heartbeat(leaseId: string): Promise<boolean>;
  /** Frees the slot; false for an unknown or already completed lease. */
  complete(leaseId: string): Promise<boolean>;
  advice(): Promise<Advice>;
}

export class AdmissionError extends Error {
  /**
   * `rejected`: the router refused this request itself (a 4xx: unknown model, larger than any
   * tokens-per-minute target, bad body) — retrying unchanged cannot help, so it counts as a
   * failed attempt. Otherwise the router is unavailable and the task is not at fault.
   */
  constructor(
    message: string,
    readonly rejected = false,
    /** The HTTP status of a refusal (404 for a model without quota, or no quotas at all). */
    readonly status?: number,
  ) {
    super(message);
  }
}

const isObj = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Checks a /schedule reply, so a malformed one is an error rather than a NaN sleep. */
export function parseSchedule(v: unknown): ScheduleResult {
  if (isObj(v)) {
    if (typeof v.wait_for_ms === 'number' && Number.isFinite(v.wait_for_ms) && v.wait_for_ms >= 0) {
      return { wait_for_ms: v.wait_for_ms };
    }
    if (typeof v.model_backend_id === 'string' && typeof v.task_id === 'string') {
      return { model_backend_id: v.model_backend_id, task_id: v.task_id };
    }
  }
  throw new AdmissionError(`unexpected /schedule reply: ${JSON.stringify(v)}`);
}

export function parseAdvice(v: unknown): Advice {
  if (
    isObj(v) &&
    typeof v.backpressure_score === 'number' &&
    Number.isFinite(v.backpressure_score) &&
    typeof v.suggested_parallelism === 'number' &&
    Number.isFinite(v.suggested_parallelism)
  ) {
    return { backpressure_score: v.backpressure_score, suggested_parallelism: v.suggested_parallelism };
  }
  throw new AdmissionError(`unexpected /advice reply: ${JSON.stringify(v)}`);
}

/** The router's admission API over HTTP. */
export class HttpAdmission implements Admission {
  private readonly base: string;

  constructor(
    baseUrl: string,
    private readonly token?: string,
  ) {
    this.base = baseUrl.replace(/\/+$/, '');
  }

  private async call(
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
  ): Promise<{ status: number; json: unknown }> {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    const res = await request(this.base + path, {
      method,
      headers,
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.body.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new AdmissionError(`${method} ${path}: HTTP ${res.statusCode}, not JSON: ${text.slice(0, 200)}`);
    }
    return { status: res.statusCode, json };
  }

  async schedule(estimatedTokens: number, model?: string): Promise<ScheduleResult> {
    const r = await this.call('POST', '/schedule', {
      estimated_tokens: estimatedTokens,
      ...(model !== undefined ? { model } : {}),
    });
    if (r.status !== 200) {
      throw new AdmissionError(
        `/schedule: HTTP ${r.status} ${JSON.stringify(r.json)}`,
        r.status >= 400 && r.status < 500,
        r.status,
      );
    }
    return parseSchedule(r.json);
  }

  async heartbeat(leaseId: string): Promise<boolean> {
    const r = await this.call('POST', '/heartbeat', { task_id: leaseId });
    return r.status === 200 && isObj(r.json) && r.json.ok !== false;
  }

  async complete(leaseId: string): Promise<boolean> {
    const r = await this.call('POST', '/complete', { task_id: leaseId });
    return r.status === 200 && isObj(r.json) && r.json.ok !== false;
  }

  async advice(): Promise<Advice> {
    const r = await this.call('GET', '/advice');
    if (r.status !== 200) throw new AdmissionError(`/advice: HTTP ${r.status} ${JSON.stringify(r.json)}`);
    return parseAdvice(r.json);
  }
}

/**
 * No quotas: every call is admitted at once and the advice is a fixed parallelism. For running the
 * solver without a router's admission API (a single model server, tests of the queue itself).
 */
export class OpenAdmission implements Admission {
  private next = 0;
  private readonly leases = new Set<string>();

  constructor(
    private readonly defaultModel: string,
    private readonly parallelism: number,
  ) {}

  schedule(_estimatedTokens: number, model?: string): Promise<ScheduleResult> {
    const id = `open_${++this.next}`;
    this.leases.add(id);
    return Promise.resolve({ model_backend_id: model ?? this.defaultModel, task_id: id });
  }

  heartbeat(leaseId: string): Promise<boolean> {
    return Promise.resolve(this.leases.has(leaseId));
  }

  complete(leaseId: string): Promise<boolean> {
    return Promise.resolve(this.leases.delete(leaseId));
  }

  advice(): Promise<Advice> {
    return Promise.resolve({ backpressure_score: 0, suggested_parallelism: this.parallelism });
  }
}
