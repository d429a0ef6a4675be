import type { ApiKind } from '../config/schema.js';

/** A backend URL split for undici: the Pool takes an origin only, the path prefix goes on each request. */
export interface BackendAddress {
  /** `scheme://host[:port]`, what the connection pools are made with. */
  readonly origin: string;
  /** Prepended to every upstream path (`/v1/chat/completions` → `${basePath}/v1/chat/completions`); '' for none. */
  readonly basePath: string;
}

export type BackendUrlResult =
  ({ readonly ok: true } & BackendAddress) | { readonly ok: false; readonly problem: string };

/**
 * Parse a configured backend URL once. `/v1` at the end is how OpenAI-API base URLs are usually
 * written (vLLM, SGLang): for `api: openai` it is understood, since the router appends `/v1/...`
 * itself. Any other path is a prefix kept in front of every upstream path (a backend behind a
 * reverse proxy at `/ollama`). What cannot be forwarded faithfully is refused with the reason.
 */
export function parseBackendUrl(url: string, api: ApiKind): BackendUrlResult {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return { ok: false, problem: `'${url}' is not a URL` };
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    return {
      ok: false,
      problem: `scheme '${u.protocol.slice(0, -1)}' is not supported; use http:// or https://`,
    };
  if (u.hostname === '') return { ok: false, problem: 'the URL has no host' };
  // Credentials would be sent nowhere (undici ignores them) and then logged with the URL.
  if (u.username !== '' || u.password !== '')
    return { ok: false, problem: 'credentials in the URL are not supported' };
  // A query or fragment cannot be glued in front of every proxied path.
  if (u.search !== '' || url.includes('?')) return { ok: false, problem: 'a query (?…) is not supported' };
  if (u.hash !== '' || url.includes('#')) return { ok: false, problem: 'a fragment (#…) is not supported' };
  let basePath = u.pathname.replace(/\/+$/, '');
  if (api === 'openai' && basePath.endsWith('/v1')) basePath = basePath.slice(0, -'/v1'.length);
  return { ok: true, origin: u.origin, basePath };
}
