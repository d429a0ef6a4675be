import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { isHold } from '../core/types.js';
import type { Policy } from '../core/types.js';

/**
 * A debugging aid (issue #31, off by default): with LLMLB_PICK_DEBUG=<dir> every pick, push and
 * answer of this router's policy is appended as one JSON line to <dir>/<pid>.jsonl — the request,
 * the candidates as shown (in flight, the policy's own view of each backend: describe()), what was
 * chosen or why it was held. Synchronous writes: for a bench's few hundred requests, never in production.
 */
export function withPickDebug(
  policy: Policy,
  others?: (backend: string) => number,
  allowance?: (backend: string) => number | undefined,
  wanted?: (id: string) => string | undefined,
): Policy {
  const dir = process.env.LLMLB_PICK_DEBUG;
  if (!dir) return policy;
  const file = join(dir, `${process.pid}.jsonl`);
  const t0 = performance.timeOrigin;
  const line = (o: Record<string, unknown>): void =>
    appendFileSync(file, JSON.stringify({ w: Math.round(t0 + performance.now()), ...o }) + '\n');
  const head = (text: string): string => text.slice(0, 9);
  const pick = policy.pick.bind(policy);
  const out: { -readonly [K in keyof Policy]: Policy[K] } = policy;
  out.pick = (req, candidates, now) => {
    const chosen = pick(req, candidates, now);
    line({
      k: 'pick',
      id: req.id,
      g: head(req.promptText),
      c: candidates.map((b) => ({
        n: b.name,
        f: b.inFlight,
        o: others?.(b.name) ?? 0,
        a: allowance?.(b.name),
        ...(policy.describe ? { d: policy.describe(b.name) } : {}),
      })),
      r: isHold(chosen) ? `hold:${chosen.hold}` : chosen.name,
      ...(isHold(chosen) && wanted ? { wf: wanted(req.id) } : {}),
      s: policy.explainLast?.()?.scores,
    });
    return chosen;
  };
  const onDispatch = policy.onDispatch?.bind(policy);
  out.onDispatch = (req, b, now) => {
    onDispatch?.(req, b, now);
    line({ k: 'push', id: req.id, g: head(req.promptText), b: b.name });
  };
  const onComplete = policy.onComplete?.bind(policy);
  out.onComplete = (req, b, report, now) => {
    onComplete?.(req, b, report, now);
    line({
      k: 'done',
      id: req.id,
      g: head(req.promptText),
      b: b.name,
      ca: report.cachedTokens,
      pt: report.promptTokens,
    });
  };
  return out;
}
