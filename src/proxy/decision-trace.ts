import { appendFileSync } from 'node:fs';
import type { BackendView, CompletionReport, Policy, RequestInfo } from '../core/types.js';

/**
 * A per-decision trace for debugging a policy on live engines (issue #30): with
 * LLMLB_DECISION_TRACE=FILE, each pick that dispatches appends one JSON line (the request, its
 * prompt's first 40 characters, the candidates, the policy's explainLast and its describe() of
 * each candidate), and each completion one line (what the engine reported: prompt and cached
 * tokens, times). Off (no wrapping) unless the variable is set; synchronous writes, debugging only.
 */
export function traced(policy: Policy, file: string | undefined = process.env.LLMLB_DECISION_TRACE): Policy {
  if (file === undefined || file === '') return policy;
  const write = (o: unknown): void => appendFileSync(file, JSON.stringify(o) + '\n');
  const pick = policy.pick.bind(policy);
  const onComplete = policy.onComplete?.bind(policy);
  const describeAll = (cs: readonly BackendView[]): Record<string, Readonly<Record<string, number>>> => {
    const out: Record<string, Readonly<Record<string, number>>> = Object.create(null) as Record<
      string,
      Readonly<Record<string, number>>
    >;
    for (const c of cs) out[c.name] = policy.describe?.(c.name) ?? {};
    return out;
  };
  const p = policy as { pick: Policy['pick']; onComplete?: Policy['onComplete'] };
  p.pick = (req: RequestInfo, candidates: readonly BackendView[], now: number) => {
    const r = pick(req, candidates, now);
    if (typeof r === 'object' && r !== null && 'name' in r) {
      write({
        ev: 'pick',
        now,
        id: req.id,
        head: req.promptText.slice(0, 40),
        chars: req.promptText.length,
        to: r.name,
        candidates: candidates.map((c) => ({
          name: c.name,
          inFlight: c.inFlight,
          waiting: c.metrics?.waiting,
          running: c.metrics?.running,
        })),
        explain: policy.explainLast?.(),
        describe: describeAll(candidates),
      });
    }
    return r;
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
