import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeKubeApi } from '../src/fleet/kubernetes/fake-api.testing.js';
import { engine } from './helpers.js';

const CLI = existsSync('dist/cli.js') ? ['dist/cli.js'] : ['--import', 'tsx', 'src/cli.ts'];

/**
 * `llmlb epp` with `discovery.kubernetes`, as deploy/kubernetes/epp runs it: the picker's fleet is
 * the InferencePool's ready pods (a fake Kubernetes API here), seen on its /metrics, and a pod that
 * turns unready leaves it.
 */
test("llmlb epp takes its fleet from an InferencePool's ready pods", async (t) => {
  const a = await engine({ host: '127.0.0.1', api: 'openai', name: 'a' });
  const port = Number(new URL(a.url).port);
  const api = new FakeKubeApi('llm');
  await api.start();
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-epp-k8s-'));
  writeFileSync(join(dir, 'token'), 'sa-token\n');
  const sel = { app: 'vllm' };
  api.setPool('pool', sel, port);
  api.setPod('pod-a', sel, '127.0.0.1', true);
  api.setPod('pod-b', sel, '127.0.0.9', false);
  const config = join(dir, 'llmlb.yaml');
  writeFileSync(
    config,
    [
      'server: { host: 127.0.0.1, port: 0 }',
      'epp: { port: 0, healthPort: 0 }',
      'discovery:',
      '  kubernetes:',
      '    inferencePool: pool',
      '    namespace: llm',
      `    apiServer: ${api.url}`,
      `    tokenFile: ${join(dir, 'token')}`,
      '    debounceMs: 20',
      '    backend: { api: openai, models: [m1] }',
      '',
    ].join('\n'),
  );
  const child = spawn(process.execPath, [...CLI, 'epp', '--config', config], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  t.after(async () => {
    child.kill('SIGKILL');
    await api.close();
    await a.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const until = async (what: string, cond: () => Promise<boolean> | boolean, ms = 20_000): Promise<void> => {
    const end = Date.now() + ms;
    while (!(await cond())) {
      if (Date.now() > end || child.exitCode !== null)
        assert.fail(`timed out waiting for ${what}; output:\n${out}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  await until('the metrics address', () => /metrics: (http:\/\/\S+)\/metrics/.test(out));
  const metricsUrl = `${/metrics: (http:\/\/\S+)\/metrics/.exec(out)![1]}/metrics`;
  const healthy = async (): Promise<Map<string, string>> => {
    const text = await (await fetch(metricsUrl)).text();
    const m = new Map<string, string>();
    for (const [, name, v] of text.matchAll(/^llmlb_backend_healthy\{backend="([^"]+)"\} (\S+)$/gm))
      m.set(name!, v!);
    return m;
  };
  await until('pod-a healthy in the picker', async () => (await healthy()).get('pod-a') === '1');
  assert.equal((await healthy()).has('pod-b'), false, 'an unready pod is not a backend');
  assert.ok(api.watches('pods') >= 1, 'the picker watches pods');

  api.setPod('pod-a', sel, '127.0.0.1', false);
  await until('pod-a gone from the picker', async () => !(await healthy()).has('pod-a'));
});
