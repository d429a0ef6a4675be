// Capture → import → replay (issue 18): a live router over emulated engines writes the trace of
// what it served; the trace loads as an llmlb trace workload and replays in the simulator with the
// same request count and token totals as the clients were served.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runSimulateCommand } from '../src/commands/simulate.js';
import { traceWorkload } from '../src/workloads/trace.js';
import { backend, engine, post, router, settings } from './helpers.js';

test('serve captures what it routed; the capture replays with the same requests and tokens', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-capture-e2e-'));
  const file = join(dir, 'trace.jsonl');
  const [a, b] = await Promise.all([engine({ seed: 1 }), engine({ seed: 2 })]);
  const { router: r, url } = await router(
    settings([backend('a', a.url), backend('b', b.url)], {
      trace: { file, maxBytes: 10_000_000, keep: 1 },
    }),
  );
  let prompt = 0;
  let output = 0;
  const n = 24;
  try {
    for (let i = 0; i < n; i++) {
      const openai = i % 2 === 1;
      const res = openai
        ? await post(
            `${url}/v1/chat/completions`,
            { model: 'm1', messages: [{ role: 'user', content: `question ${i} `.repeat(5 + i) }] },
            { 'x-llmlb-output-tokens': String(3 + i) },
          )
        : await post(
            `${url}/api/generate`,
            { model: 'm1', prompt: `question ${i} `.repeat(5 + i), stream: i % 4 === 0 },
            { 'x-llmlb-output-tokens': String(3 + i) },
          );
      assert.equal(res.status, 200);
      const text = await res.text();
      if (openai) {
        const u = (JSON.parse(text) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;
        prompt += u.prompt_tokens;
        output += u.completion_tokens;
      } else {
        const last = JSON.parse(text.trim().split('\n').pop()!) as {
          prompt_eval_count: number;
          eval_count: number;
        };
        prompt += last.prompt_eval_count;
        output += last.eval_count;
      }
    }
    // An unknown model is answered 404 before routing: it is not traffic a replay schedules.
    assert.equal((await post(`${url}/api/generate`, { model: 'nope', prompt: 'x' })).status, 404);
    // The capture's counters are on /metrics (an operator sees lines lost to a failing disk).
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.match(metrics, new RegExp(`llmlb_trace_lines_total\\{outcome="recorded"\\} ${n}\\b`));
    assert.match(metrics, /llmlb_trace_lines_total\{outcome="dropped"\} 0\b/);
  } finally {
    await r.close(); // flushes the capture
    await Promise.all([a.close(), b.close()]);
  }

  const lines = readFileSync(file, 'utf8').trim().split('\n');
  assert.equal(lines.length, n);
  assert.ok(!readFileSync(file, 'utf8').includes('question'), 'no prompt text without log.prompts');
  const replay = traceWorkload({ path: file }, 1);
  assert.equal(replay.start().length, n);
  assert.equal(replay.stats.promptTokens, prompt, 'prompt tokens as served');
  assert.equal(replay.stats.outputTokens, output, 'output tokens as served');

  // The same file through `llmlb simulate` on a two-replica fleet: every request completes.
  const scenario = join(dir, 'replay.yaml');
  writeFileSync(
    scenario,
    [
      'name: replay',
      'seed: 1',
      'durationS: 600',
      'graceS: 600',
      'defaults: { models: [m1], profile: { slots: 4 } }',
      'fleet:',
      '  - { name: inst, count: 2 }',
      `workload: { type: trace, path: ${JSON.stringify(file)} }`,
      'policies: [least-connections]',
    ].join('\n'),
  );
  const results = await runSimulateCommand({
    scenarioPath: scenario,
    outDir: join(dir, 'out'),
    charts: false,
    quiet: true,
  });
  assert.equal(results.policies[0]!.sent, n);
  assert.equal(results.policies[0]!.completed, n);
});
