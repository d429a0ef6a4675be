import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stateSize } from '../src/core/policies/builtin/rl.js';
import { createRng } from '../src/core/rng.js';
import type { EngineServer } from '../src/engine/server.js';
import { silentLogger } from '../src/log.js';
import { Router } from '../src/proxy/router.js';
import { Mlp } from '../src/rl/mlp.js';
import { readRlWeights } from '../src/rl/weights-file.js';
import { backend, engine, settings } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'llmlb-rl-'));
const file = (name: string, text: string): string => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};
const good = file(
  'good.json',
  JSON.stringify({
    kind: 'llmlb-rl',
    backends: 2,
    bucketEdges: [250, 1000],
    kvCapacityTokens: 4096,
    net: new Mlp([stateSize(2, 3), 8, 3], createRng(3)).toJSON(),
  }),
);
const bad: [string, RegExp][] = [
  [join(dir, 'missing.json'), /no such file/],
  [file('broken.json', '{"kind": "llmlb-rl",'), /not valid JSON/],
  [
    file(
      'shape.json',
      JSON.stringify({
        kind: 'llmlb-rl',
        backends: 2,
        bucketEdges: [250, 1000],
        kvCapacityTokens: 9,
        net: { sizes: [5, 3], layers: [{ w: [], b: [] }] },
      }),
    ),
    /layer 0: w must be 15/,
  ],
  [
    file(
      'sizes.json',
      JSON.stringify({
        kind: 'llmlb-rl',
        backends: 2,
        bucketEdges: [250, 1000],
        kvCapacityTokens: 9,
        net: new Mlp([7, 3], createRng(1)).toJSON(),
      }),
    ),
    /net input must be 17/,
  ],
];

let a: EngineServer;
let r: Router;
let url: string;
before(async () => {
  a = await engine();
  r = new Router(
    settings([backend('a', a.url), backend('b', a.url)], { admin: { token: 't' } }),
    silentLogger(),
  );
  url = await r.listen('127.0.0.1', 0);
});
after(async () => {
  await r.close();
  await a.close();
});

const put = async (policy: unknown) => {
  const res = await fetch(`${url}/admin/policy`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: 'Bearer t' },
    body: JSON.stringify({ policy }),
  });
  return { status: res.status, json: (await res.json()) as { error?: { message: string } } };
};
const current = async (): Promise<string> =>
  (
    (await (await fetch(`${url}/admin/backends`, { headers: { authorization: 'Bearer t' } })).json()) as {
      policy: string;
    }
  ).policy;

test('PUT /admin/policy: a bad weights file is a 400 naming it, and the previous policy stays', async () => {
  assert.equal((await put('round-robin')).status, 200);
  for (const [path, why] of bad) {
    const res = await put({ name: 'rl', file: path });
    assert.equal(res.status, 400, path);
    assert.match(res.json.error?.message ?? '', why);
    assert.match(res.json.error?.message ?? '', /policy rl: file/);
    assert.equal(await current(), 'round-robin');
  }
  assert.equal((await put({ name: 'rl', file: good })).status, 200);
  assert.equal(await current(), 'rl');
  // It routes: a request through the rl policy is answered.
  const res = await fetch(`${url}/api/generate`, {
    method: 'POST',
    body: JSON.stringify({ model: 'm1', prompt: 'hi', stream: false }),
  });
  assert.equal(res.status, 200);
  await res.arrayBuffer();
});

test('serve: a bad weights file is a config error, exit 2', () => {
  for (const [path, why] of bad.slice(0, 2)) {
    const cfg = file(
      'cfg.yaml',
      `server: { port: 0 }\npolicy: { name: rl, file: "${path}" }\nbackends:\n  - { name: a, url: "${a.url}", models: [m1] }\n`,
    );
    const out = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'serve', '--config', cfg], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    assert.equal(out.status, 2, out.stderr);
    assert.match(out.stderr, why);
  }
});

test('no file: the shipped mixed-4x weights load', async () => {
  const { createPolicy } = await import('../src/core/policies/index.js');
  assert.equal(createPolicy({ name: 'rl' }, Math.random, undefined, { rlWeights: readRlWeights }).name, 'rl');
  // Without the host's reader the core reads no file: it says so rather than route on nothing.
  assert.throws(() => createPolicy({ name: 'rl' }, Math.random), /shipped weights: no weights reader/);
  assert.equal((readRlWeights(undefined) as { backends: number }).backends, 4);
});
