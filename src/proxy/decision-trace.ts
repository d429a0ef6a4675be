import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { isHold } from '../core/types.js';
import type { BackendView, CompletionReport, Policy, RequestInfo } from '../core/types.js';

/**
 * A per-decision trace for debugging a policy on live engines (issues #30, #31), off unless set:
 * - `LLMLB_DECISION_TRACE=FILE`: each pick that dispatches appends one JSON line (the request, its
 *   prompt's first 40 characters, the candidates, the policy's explainLast and its describe() of
 *   each candidate), and each completion one line (what the engine reported: prompt and cached
 *   tokens, times);
 * - `LLMLB_PICK_DEBUG=DIR`: the same into `DIR/<pid>.jsonl` (one file per router process), and also
 *   a line per hold (why, and with sharedState the backend the request waits for) and per push.
 * Synchronous writes: debugging only, never in production.
 */
export interface TraceSink {
  readonly file: string;
  /** Also holds and pushes (LLMLB_PICK_DEBUG), not only dispatching picks and completions. */
  readonly every: boolean;
}

/** sharedState's numbers per candidate and per held request, for the trace. */
export interface TraceSharing {
  othersOf(backend: string): number;
  allowance(backend: string): number | undefined;
  waitingFor(requestId: string): string | undefined;
}

/** Where the environment asks the trace to go (undefined: off). */
export function traceSink(env: NodeJS.ProcessEnv = process.env): TraceSink | undefined {
  const file = env.LLMLB_DECISION_TRACE;
  if (file) return { file, every: false };
  const dir = env.LLMLB_PICK_DEBUG;
  return dir ? { file: join(dir, `${process.pid}.jsonl`), every: true } : undefined;
}

export function traced(
  policy: Policy,
  sink: TraceSink | string | undefined = traceSink(),
  sharing?: TraceSharing,
): Policy {
  const to = typeof sink === 'string' ? (sink === '' ? undefined : { file: sink, every: false }) : sink;
  if (to === undefined) return policy;
  const write = (o: unknown): void => appendFileSync(to.file, JSON.stringify(o) + '\n');
  const pick = policy.pick.bind(policy);
  const onDispatch = policy.onDispatch?.bind(policy);
  const onComplete = policy.onComplete?.bind(policy);
  const describeAll = (cs: readonly BackendView[]): Record<string, Readonly<Record<string, number>>> => {
    const out: Record<string, Readonly<Record<string, number>>> = Object.create(null) as Record<
      string,
      Readonly<Record<string, number>>
    >;
    for (const c of cs) out[c.name] = policy.describe?.(c.name) ?? {};
    return out;
  };
  const p = policy as {
    pick: Policy['pick'];
    onDispatch?: Policy['onDispatch'];
    onComplete?: Policy['onComplete'];
  };
  p.pick = (req: RequestInfo, candidates: readonly BackendView[], now: number) => {
    const r = pick(req, candidates, now);
    const held = isHold(r);
    if (held && !to.every) return r;
    write({
      ev: 'pick',
      now,
      id: req.id,
      head: req.promptText.slice(0, 40),
      chars: req.promptText.length,
      to: held ? `hold:${r.hold}` : r.name,
      ...(held && sharing ? { waitingFor: sharing.waitingFor(req.id) } : {}),
      candidates: candidates.map((c) => ({
        name: c.name,
        inFlight: c.inFlight,
        waiting: c.metrics?.waiting,
        running: c.metrics?.running,
        ...(sharing ? { others: sharing.othersOf(c.name), allowance: sharing.allowance(c.name) } : {}),
      })),
      explain: policy.explainLast?.(),
      describe: describeAll(candidates),
    });
    return r;
  };
  if (to.every)
    p.onDispatch = (req: RequestInfo, backend: BackendView, now: number) => {
      onDispatch?.(req, backend, now);
      write({ ev: 'push', now, id: req.id, head: req.promptText.slice(0, 40), backend: backend.name });
    };
  p.onComplete = (req: RequestInfo, backend: BackendView, report: CompletionReport, now: number) => {
    write({
      ev: 'done',
      now,
      id: req.id,
      backend: backend.name,
      promptTokens: report.promptTokens,
      cachedTokens: report.cachedTokens,
      ttftMs: report.firstByteAt === undefined ? undefined : report.firstByteAt - report.dispatchedAt,
      wallMs: report.finishedAt - report.dispatchedAt,
    });
    onComplete?.(req, backend, report, now);
  };
  return policy;
}
