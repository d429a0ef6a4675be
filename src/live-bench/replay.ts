import { performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';
import { endpoint } from '../api/endpoints.js';
import { countTokens, flattenMessages } from '../engine/tokens.js';
import type { ClientDriver, ScheduledRequest, WorkloadRequest } from '../workloads/types.js';

/** What the client saw of one request, in model seconds from the start of the run. */
export interface ClientRecord {
  readonly id: string;
  readonly label: string | undefined;
  readonly arrivalS: number;
  readonly firstTokenS: number | undefined;
  readonly finishS: number | undefined;
  readonly backend: string | undefined;
  readonly ok: boolean;
  readonly status: number;
  readonly outputTokens: number;
  /** Prompt tokens as the simulator counts them (the request's own count, else its text's). */
  readonly promptTokens: number;
  /** The client gave up after the request's timeoutS (counted failed, as the simulator does). */
  readonly timedOut: boolean;
  /** What the HTTP client threw (connection reset, …), when the request failed that way. */
  readonly error?: string | undefined;
}

export interface ReplayOptions {
  readonly baseUrl: string;
  /** Model seconds per real second (the engines run this much faster than life). */
  readonly timeScale: number;
  /** Requests are sent during [0, durationS) model seconds... */
  readonly durationS: number;
  /** ...and the run waits up to graceS more for them to finish. */
  readonly graceS: number;
  readonly onProgress?: (done: number, sent: number) => void;
}

/** The HTTP body a real client of that API would send; streaming, so time to first token is visible. */
export function requestBody(r: WorkloadRequest): string {
  const ollama = endpoint(r.api).family === 'ollama';
  const body: Record<string, unknown> = { model: r.model, stream: true };
  if (r.messages) body.messages = r.messages;
  else body.prompt = r.prompt ?? '';
  if (ollama) {
    if (r.maxTokens !== undefined) body.options = { num_predict: r.maxTokens };
  } else {
    body.stream_options = { include_usage: true };
    if (r.maxTokens !== undefined) body.max_tokens = r.maxTokens;
    if (r.sessionKey !== undefined) body.user = r.sessionKey;
  }
  return JSON.stringify(body);
}

/** Text and token count of a finished stream (Ollama NDJSON or OpenAI SSE). */
function parseStream(
  api: WorkloadRequest['api'],
  text: string,
): { output: string; tokens: number; error: boolean } {
  let output = '';
  let tokens = 0;
  let error = false;
  if (endpoint(api).family === 'ollama') {
    for (const line of text.split('\n')) {
      if (line === '') continue;
      try {
        const o = JSON.parse(line) as {
          response?: string;
          message?: { content?: string };
          eval_count?: number;
          error?: unknown;
          done?: boolean;
        };
        if (o.error !== undefined) error = true;
        output += o.response ?? o.message?.content ?? '';
        if (o.done && typeof o.eval_count === 'number') tokens = o.eval_count;
      } catch {
        error = true;
      }
    }
  } else {
    for (const ev of text.split('\n\n')) {
      const line = ev.trim();
      if (!line.startsWith('data:')) continue;
      const payload = line.slice(5).trim();
      if (payload === '[DONE]') continue;
      try {
        const o = JSON.parse(payload) as {
          choices?: { text?: string; delta?: { content?: string } }[];
          usage?: { completion_tokens?: number };
          error?: unknown;
        };
        if (o.error !== undefined) error = true;
        const c = o.choices?.[0];
        output += c?.delta?.content ?? c?.text ?? '';
        if (typeof o.usage?.completion_tokens === 'number') tokens = o.usage.completion_tokens;
      } catch {
        error = true;
      }
    }
  }
  return { output, tokens, error };
}

/**
 * Replay a client program over HTTP in scaled real time: each request leaves at its model time
 * / timeScale; closed-loop follow-ups are scheduled when their parent finishes. Resolves when
 * every request settled or the grace period ran out (unfinished ones are recorded as such).
 */
export async function replay(driver: ClientDriver, opts: ReplayOptions): Promise<ClientRecord[]> {
  const agent = new Agent({ connections: 4096, keepAliveTimeout: 60_000, headersTimeout: 0, bodyTimeout: 0 });
  const t0 = performance.now();
  const modelNow = (): number => ((performance.now() - t0) / 1000) * opts.timeScale;
  const endS = opts.durationS + opts.graceS;
  const records: ClientRecord[] = [];
  const open = new Map<string, { arrivalS: number; label: string | undefined; ac: AbortController }>();
  const timers = new Set<NodeJS.Timeout>();
  let sent = 0;
  let done = 0;
  let finishAll: () => void = () => undefined;
  let failAll: (err: unknown) => void = () => undefined;
  const allDone = new Promise<void>((resolve, reject) => {
    finishAll = resolve;
    failAll = reject;
  });
  let pendingTimers = 0;

  const maybeDone = (): void => {
    if (open.size === 0 && pendingTimers === 0) finishAll();
  };

  const send = async (req: WorkloadRequest): Promise<void> => {
    const arrivalS = modelNow();
    const ac = new AbortController();
    let timedOut = false;
    const timeout =
      req.timeoutS !== undefined
        ? setTimeout(
            () => {
              timedOut = true;
              ac.abort();
            },
            (req.timeoutS / opts.timeScale) * 1000,
          )
        : undefined;
    open.set(req.id, { arrivalS, label: req.label, ac });
    sent++;
    let firstTokenS: number | undefined;
    let status = 0;
    let backend: string | undefined;
    let ok = false;
    let tokens = 0;
    let output = '';
    let error: string | undefined;
    try {
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        'x-llmlb-output-tokens': String(req.outputTokens),
        'x-request-id': req.id,
      };
      if (req.sessionKey !== undefined) headers['x-session-token'] = req.sessionKey;
      if (req.taskHint !== undefined) headers['x-llmlb-task'] = req.taskHint;
      const res = await request(opts.baseUrl + endpoint(req.api).path, {
        method: 'POST',
        headers,
        body: requestBody(req),
        dispatcher: agent,
        signal: ac.signal,
      });
      status = res.statusCode;
      const b = res.headers['x-llmlb-backend'];
      backend = typeof b === 'string' ? b : undefined;
      const chunks: Buffer[] = [];
      for await (const chunk of res.body) {
        if (firstTokenS === undefined) firstTokenS = modelNow();
        chunks.push(chunk as Buffer);
      }
      const parsed = parseStream(req.api, Buffer.concat(chunks).toString('utf8'));
      ok = status === 200 && !parsed.error;
      tokens = parsed.tokens;
      output = parsed.output;
    } catch (err) {
      ok = false;
      const e = err as { code?: unknown; message?: unknown };
      error = `${typeof e.code === 'string' ? `${e.code}: ` : ''}${String(e.message ?? err)}`;
    }
    if (timeout) clearTimeout(timeout);
    const finishS = modelNow();
    if (!open.delete(req.id)) return; // cut off by the end of the run: already recorded
    done++;
    records.push({
      id: req.id,
      label: req.label,
      arrivalS,
      firstTokenS,
      finishS: ok ? finishS : undefined,
      backend,
      ok,
      status,
      outputTokens: tokens,
      promptTokens:
        req.promptTokens ?? countTokens(req.messages ? flattenMessages(req.messages) : (req.prompt ?? '')),
      timedOut,
      error,
    });
    opts.onProgress?.(done, sent);
    schedule(driver.onFinish(req.id, finishS, ok, output));
    maybeDone();
  };

  function schedule(items: readonly ScheduledRequest[]): void {
    for (const it of items) {
      if (it.at >= opts.durationS) continue;
      const delayMs = Math.max(0, ((it.at - modelNow()) / opts.timeScale) * 1000);
      pendingTimers++;
      const t = setTimeout(() => {
        timers.delete(t);
        pendingTimers--;
        // send() records every HTTP outcome; what escapes it (a driver's bug) ends the replay.
        send(it.request).catch(failAll);
      }, delayMs);
      timers.add(t);
    }
  }

  schedule(driver.start());
  maybeDone();
  const deadline = setTimeout(() => finishAll(), (endS / opts.timeScale) * 1000);
  try {
    await allDone;
  } catch (err) {
    for (const o of open.values()) o.ac.abort();
    await agent.close().catch(() => undefined);
    throw err;
  } finally {
    clearTimeout(deadline);
    for (const t of timers) clearTimeout(t);
  }
  // Whatever is still open did not finish within the run: record it as unfinished.
  for (const [id, o] of open) {
    records.push({
      id,
      label: o.label,
      arrivalS: o.arrivalS,
      firstTokenS: undefined,
      finishS: undefined,
      backend: undefined,
      ok: false,
      status: 0,
      outputTokens: 0,
      promptTokens: 0,
      timedOut: false,
    });
    o.ac.abort();
  }
  open.clear();
  await agent.close().catch(() => undefined);
  return records.sort((a, b) => a.arrivalS - b.arrivalS || (a.id < b.id ? -1 : 1));
}
