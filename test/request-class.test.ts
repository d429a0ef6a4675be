// Issue #17 items 2–3 over real HTTP: each /admin/decisions entry carries the performance-aware router's request class
// (LL / LH / HL / HH on the chosen backend, from its speed), and a task-hint header reaches the
// output-length predictor.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { ConfigError, parseConfig } from '../src/config/load.js';
import { createPolicy, policyNames } from '../src/core/policies/index.js';
import { trackedHooks } from '../src/core/policies/framework/tracked-policy.js';
import { WorkloadParams, WorkloadTracker } from '../src/core/policies/shared/workload-tracker.js';
import type { Policy } from '../src/core/types.js';
import { OUTPUT_TOKENS_HEADER } from '../src/engine/server.js';
import { backend, engine, fastProfile, post, router, settings } from './helpers.js';

interface Decisions {
  decisions: { requestId: string; backend: string | null; class: string | null }[];
}

/** 1000 tokens by the router's 4-characters-a-token count. */
const LONG = 'lorem ipsum dolor sit amet '.repeat(148).slice(0, 4000);

// The engine runs at the tracker's prior speeds (0.02 s a decode step, 3.2e-4 s a prompt token), so
// the classes do not move as the router learns each backend's speed from the first answers.
const seedSpeedEngine = () =>
  engine({ profile: fastProfile({ baseStepS: 0.02, prefillPerTokenS: 3.2e-4, slots: 8 }) });

// Heavy prompt ≥ 0.1 s of prefill (LONG: 0.32 s; "hi": ~0), heavy decode ≥ 0.5 s (60 tokens:
// 1.2 s; 10 tokens: 0.2 s).
const CLASSED = { heavyPromptS: 0.1, heavyDecodeS: 0.5 };

const CASES = [
  { id: 'c-ll', prompt: 'hi', tokens: 10, cls: 'LL' },
  { id: 'c-lh', prompt: 'hi', tokens: 60, cls: 'LH' },
  { id: 'c-hl', prompt: LONG, tokens: 10, cls: 'HL' },
  { id: 'c-hh', prompt: LONG, tokens: 60, cls: 'HH' },
] as const;

async function classesUnder(policy: { name: string; params: Record<string, unknown> }) {
  const [a, b] = await Promise.all([seedSpeedEngine(), seedSpeedEngine()]);
  const { router: r, url } = await router(
    settings([backend('a', a.url), backend('b', b.url)], { policy, admin: { token: 't' } }),
  );
  try {
    for (const c of CASES) {
      const res = await post(
        `${url}/api/generate`,
        { model: 'm1', prompt: c.prompt, stream: false, options: { num_predict: c.tokens } },
        { 'x-request-id': c.id, [OUTPUT_TOKENS_HEADER]: String(c.tokens) },
      );
      assert.equal(res.status, 200);
      await res.arrayBuffer();
    }
    const res = await fetch(`${url}/admin/decisions`, { headers: { authorization: 'Bearer t' } });
    assert.equal(res.status, 200);
    return ((await res.json()) as Decisions).decisions;
  } finally {
    await r.close();
    await Promise.all([a.close(), b.close()]);
  }
}

test('/admin/decisions: each dispatch carries its class on the chosen backend (workload-aware)', async () => {
  const ds = await classesUnder({ name: 'workload-aware', params: CLASSED });
  for (const c of CASES) {
    const d = ds.find((x) => x.requestId === c.id);
    assert.ok(d, `decision for ${c.id}: ${JSON.stringify(ds)}`);
    assert.ok(d.backend === 'a' || d.backend === 'b');
    assert.equal(d.class, c.cls, `${c.id}: ${JSON.stringify(d)}`);
  }
});

test('/admin/decisions: class is null under a policy that does not track workload', async () => {
  const ds = await classesUnder({ name: 'least-connections', params: {} });
  assert.equal(ds.length, CASES.length);
  for (const d of ds) {
    assert.ok(d.backend !== null);
    assert.ok('class' in d, JSON.stringify(d)); // present, not dropped from the JSON
    assert.equal(d.class, null);
  }
});

test('a task-hint header reaches the output-length predictor (configured name, default name)', async () => {
  const a = await engine();
  // A tracker taught that the same prompt answers long for task "essay" and short for "label".
  const tracker = new WorkloadTracker(WorkloadParams.parse({}));
  const q = (hint: string) => ({ model: 'm1', promptTokens: 1, text: 'same prompt', hint });
  for (let i = 0; i < 200; i++) {
    tracker.predictor.observe(q('essay'), 1500);
    tracker.predictor.observe(q('label'), 20);
  }
  const predicted = new Map<string, number>();
  const inner = createPolicy({ name: 'least-connections', params: {} }, () => 0.5);
  const spy: Policy = {
    name: 'spy',
    pick(req, candidates, now) {
      predicted.set(req.id, tracker.predict(req).bucket);
      return inner.pick(req, candidates, now);
    },
    ...trackedHooks(tracker),
  };
  for (const header of ['x-task-name', undefined]) {
    const s = settings([backend('a', a.url)]);
    const { router: r, url } = await router(
      header ? { ...s, server: { ...s.server, taskHintHeader: header } } : s,
    );
    try {
      r.apply(r.scheduler.setPolicy(r.explained(spy), performance.now()));
      const send = async (hint: string | undefined): Promise<number> => {
        predicted.clear();
        const h: Record<string, string> = { [OUTPUT_TOKENS_HEADER]: '3' };
        if (hint !== undefined) h[header ?? 'x-llmlb-task'] = hint;
        const res = await post(
          `${url}/api/generate`,
          { model: 'm1', prompt: 'same prompt', stream: false },
          h,
        );
        assert.equal(res.status, 200);
        await res.arrayBuffer();
        assert.equal(predicted.size, 1);
        return [...predicted.values()][0]!;
      };
      assert.equal(await send('essay'), 2, `${header ?? 'default'}: essay → the ≥ 1000-token bucket`);
      assert.equal(await send('label'), 0, `${header ?? 'default'}: label → the < 250-token bucket`);
      assert.equal(await send('  essay  '), 2, 'trimmed');
    } finally {
      await r.close();
    }
  }
  await a.close();
});

test('server.taskHintHeader: x-llmlb-task by default, any header name, lower-cased', () => {
  const opts = { knownPolicies: policyNames(), validatePolicy: () => undefined, source: 't.yaml' };
  const minimal = 'backends:\n  - name: a\n    url: http://127.0.0.1:11434\n';
  assert.equal(parseConfig(minimal, opts).server.taskHintHeader, 'x-llmlb-task');
  const set = parseConfig(`${minimal}server: { taskHintHeader: X-App-Task }\n`, opts);
  assert.equal(set.server.taskHintHeader, 'x-app-task');
  assert.throws(() => parseConfig(`${minimal}server: { taskHintHeader: 'x task' }\n`, opts), ConfigError);
});
