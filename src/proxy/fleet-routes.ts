/**
 * Read-only routes answered from the whole fleet rather than one backend: Ollama's health check
 * (`GET /`, what the ollama CLI calls first), `GET /api/ps` merged over every healthy backend, and
 * `GET /v1/models/{id}`. HEAD gets the same answers without a body (the router maps it to GET).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Scheduler } from '../core/scheduler.js';
import type { BackendRuntime, Fleet } from '../fleet/fleet.js';
import { sendError, sendJson } from '../http/errors.js';

export interface FleetRouteHost {
  readonly scheduler: Scheduler;
  readonly fleet: Fleet;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A slow backend must not hold /api/ps up: its models are left out after this long. */
const PS_TIMEOUT_MS = 2000;

/** Answers the request and returns true when the path is one of these routes. */
export function handleFleetRoute(
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  host: FleetRouteHost,
): boolean {
  const isModel = path.startsWith('/v1/models/') && path.length > '/v1/models/'.length;
  if (path !== '/' && path !== '/api/ps' && !isModel) return false;
  if (req.method !== 'GET') {
    sendError(res, isModel ? 'openai' : 'ollama', 405, 'method not allowed; use GET', 'method_not_allowed', {
      allow: 'GET, HEAD',
    });
    return true;
  }
  if (path === '/') {
    const body = 'Ollama is running';
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'content-length': body.length });
    res.end(body);
  } else if (path === '/api/ps') {
    void fleetPs(host).then(
      (models) => sendJson(res, 200, { models }),
      () => sendError(res, 'ollama', 502, 'could not read loaded models', 'upstream_error'),
    );
  } else {
    let id: string;
    try {
      id = decodeURIComponent(path.slice('/v1/models/'.length));
    } catch {
      sendError(res, 'openai', 400, 'model id is not valid URL encoding', 'invalid_model_id');
      return true;
    }
    if (host.scheduler.models().has(id))
      sendJson(res, 200, { id, object: 'model', created: 0, owned_by: 'llmlb' });
    else sendError(res, 'openai', 404, `The model \`${id}\` does not exist.`, 'model_not_found');
  }
  return true;
}

/**
 * Every healthy backend's loaded models, one entry per model name (the first backend's, with the
 * latest expiry). Ollama backends are asked live; OpenAI-API engines keep their models loaded, so
 * theirs are listed as they are configured or discovered.
 */
async function fleetPs(host: FleetRouteHost): Promise<Obj[]> {
  const healthy = host.fleet.all().filter((rt) => host.scheduler.backend(rt.config.name)?.healthy === true);
  const lists = await Promise.all(healthy.map((rt) => backendPs(host, rt)));
  const merged = new Map<string, Obj>();
  for (const list of lists) {
    for (const m of list) {
      const name = m.name as string;
      const have = merged.get(name);
      if (!have) merged.set(name, m);
      else if (typeof m.expires_at === 'string' && String(have.expires_at ?? '') < m.expires_at)
        merged.set(name, { ...have, expires_at: m.expires_at });
    }
  }
  return [...merged.values()];
}

async function backendPs(host: FleetRouteHost, rt: BackendRuntime): Promise<Obj[]> {
  if (rt.config.api === 'openai') {
    const models = host.scheduler.backend(rt.config.name)?.models ?? new Set<string>();
    return [...models].map((name) => ({
      name,
      model: name,
      size: 0,
      digest: '',
      details: {},
      expires_at: '0001-01-01T00:00:00Z',
      size_vram: 0,
    }));
  }
  try {
    const res = await rt.control.request({
      path: rt.basePath + '/api/ps',
      method: 'GET',
      headersTimeout: PS_TIMEOUT_MS,
      bodyTimeout: PS_TIMEOUT_MS,
      signal: AbortSignal.timeout(PS_TIMEOUT_MS),
    });
    const body: unknown = await res.body.json();
    if (res.statusCode !== 200 || !isObj(body) || !Array.isArray(body.models)) return [];
    // Only Ollama's own fields: the emulated engine's `llmlb` extension is per backend.
    return body.models.filter((m): m is Obj => isObj(m) && typeof m.name === 'string');
  } catch {
    return []; // unreachable or not Ollama: nothing loaded that we know of
  }
}
