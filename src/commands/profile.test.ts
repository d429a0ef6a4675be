import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultProfile, startEngine } from '../engine/server.js';
import { loadProfileFile } from '../scenario/profile-file.js';
import { createServer } from 'node:net';
import { linearFit, profilesFromTrace } from '../engine/profile-fit.js';
import { probeBackend } from '../fleet/probe.js';
import { checkBackend, runProfileCommand } from './profile.js';
import { CommandError, UsageError } from './usage-error.js';

const within = (got: number, want: number, tol: number, what: string): void =>
  assert.ok(Math.abs(got - want) <= tol * want, `${what}: got ${got}, want ${want} ± ${tol * 100} %`);

test('linearFit recovers a line', () => {
  const { a, b } = linearFit([1, 2, 3, 4], [3, 5, 7, 9]);
  assert.ok(Math.abs(a - 1) < 1e-12 && Math.abs(b - 2) < 1e-12);
});

test('probing an emulated engine (Ollama API) recovers its constants within 10 %', async () => {
  // Not the defaults: the probe must find these, not what it might assume.
  const truth = defaultProfile({
    slots: 4,
    baseStepS: 0.025,
    perSeqS: 0.002,
    perTokenS: 2e-6,
    prefillPerTokenS: 4e-4,
    kvCapacityTokens: 65536,
  });
  const timeScale = 5;
  const engine = await startEngine({ port: 0, api: 'ollama', profile: truth, timeScale, models: ['m'] });
  try {
    const dir = mkdtempSync(join(tmpdir(), 'llmlb-profile-'));
    const out = join(dir, 'profile.yaml');
    const r = await probeBackend({ backend: engine.url, model: 'm', api: 'ollama', timeScale });
    const p = r.profile;
    assert.equal(p.slots, 4, 'throughput stops growing past the 4 slots');
    within(p.baseStepS, truth.baseStepS, 0.1, 'baseStepS');
    within(p.perSeqS, truth.perSeqS, 0.1, 'perSeqS');
    within(p.perTokenS, truth.perTokenS, 0.1, 'perTokenS');
    within(p.prefillPerTokenS, truth.prefillPerTokenS, 0.1, 'prefillPerTokenS');
    assert.ok(r.requests <= 25, 'a short, bounded probe');
    // The command writes a file whatif reads.
    await runProfileCommand({ backend: engine.url, model: 'm', api: 'ollama', timeScale, out, quiet: true });
    const loaded = loadProfileFile(out);
    assert.equal(loaded.slots, 4);
    within(loaded.prefillPerTokenS, truth.prefillPerTokenS, 0.1, 'file prefillPerTokenS');
  } finally {
    await engine.close();
  }
});

test('profiles from a captured trace: prefill from TTFT, base and per-sequence step from concurrency', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-profile-trace-'));
  const path = join(dir, 'capture.jsonl');
  const base = 0.02;
  const perSeq = 0.004;
  const lines: string[] = [];
  let at = 0;
  for (let i = 0; i < 20; i++) {
    const prompt = 100 + 50 * i;
    const ttft = 0.05 + 3e-4 * prompt;
    const out = 50;
    // Alone on gpu-a; then a pair that decode side by side.
    const alone = ttft + (out - 1) * (base + perSeq);
    lines.push(
      JSON.stringify({
        at,
        promptTokens: prompt,
        outputTokens: out,
        backend: 'gpu-a',
        ttftS: ttft,
        e2eS: alone,
        status: 200,
      }),
    );
    at += 100;
    const pair = ttft + (out - 1) * (base + 2 * perSeq);
    for (let k = 0; k < 2; k++)
      lines.push(
        JSON.stringify({
          at,
          promptTokens: prompt,
          outputTokens: out,
          backend: 'gpu-a',
          ttftS: ttft,
          e2eS: pair,
          status: 200,
        }),
      );
    at += 100;
  }
  lines.push(
    JSON.stringify({ at, promptTokens: 10, outputTokens: 5, backend: 'gpu-a', e2eS: 0.1, status: 502 }),
  );
  writeFileSync(path, lines.join('\n') + '\n');
  const per = await profilesFromTrace(path);
  const a = per.get('gpu-a')!;
  assert.equal(a.requests, 60, 'failed lines are left out');
  assert.equal(a.maxConcurrency, 2);
  within(a.profile.prefillPerTokenS, 3e-4, 0.01, 'prefill');
  within(a.profile.baseStepS, base, 0.05, 'base');
  within(a.profile.perSeqS, perSeq, 0.05, 'perSeq');

  const out = join(dir, 'p.yaml');
  await runProfileCommand({ trace: path, out, quiet: true });
  assert.match(readFileSync(out, 'utf8'), /gpu-a/);
  assert.equal(loadProfileFile(out).slots, 2);

  writeFileSync(path, lines[0] + '\n{"at": 1,\n');
  await assert.rejects(
    runProfileCommand({ trace: path, out, quiet: true }),
    (e: Error) => e instanceof UsageError && /:2: not JSON/.test(e.message),
  );
});

test('usage errors', async () => {
  await assert.rejects(runProfileCommand({ quiet: true }), UsageError);
  await assert.rejects(
    runProfileCommand({ trace: 'no-such-capture.jsonl', quiet: true }),
    (e: Error) => e instanceof UsageError && e.message === 'trace file not found: no-such-capture.jsonl',
  );
  await assert.rejects(runProfileCommand({ backend: 'nope', model: 'm', quiet: true }), UsageError);
  await assert.rejects(
    runProfileCommand({ backend: 'http://127.0.0.1:1', model: 'm', api: 'grpc', quiet: true }),
    UsageError,
  );
});

/** A port nothing listens on: one that was just bound and released. */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

test('before probing: an unreachable backend, an unknown model, the wrong API are one-line CommandErrors', async () => {
  const port = await closedPort();
  await assert.rejects(
    runProfileCommand({ backend: `http://127.0.0.1:${port}`, model: 'm', quiet: true }),
    (e: Error) =>
      e instanceof CommandError && e.message === `cannot reach http://127.0.0.1:${port}: connection refused`,
  );
  const openai = await startEngine({ port: 0, api: 'openai', profile: defaultProfile(), models: ['a', 'b'] });
  const ollama = await startEngine({ port: 0, api: 'ollama', profile: defaultProfile(), models: ['llama3'] });
  try {
    await checkBackend(openai.url, 'a', 'openai');
    await checkBackend(ollama.url, 'llama3', 'ollama');
    await assert.rejects(
      checkBackend(openai.url, 'nope', 'openai'),
      (e: Error) =>
        e instanceof CommandError && e.message === `model 'nope' not found on ${openai.url}; it has: a, b`,
    );
    await assert.rejects(
      checkBackend(ollama.url, 'nope', 'ollama'),
      (e: Error) => e instanceof CommandError && /it has: llama3/.test(e.message),
    );
    await assert.rejects(
      checkBackend(openai.url, 'a', 'ollama'),
      (e: Error) =>
        e instanceof CommandError &&
        /does not answer the Ollama API \(GET \/api\/tags: 404\); the server answers the OpenAI API; try --api openai$/.test(
          e.message,
        ) &&
        !e.message.includes('\n'),
    );
  } finally {
    await Promise.all([openai.close(), ollama.close()]);
  }
});
