// What a new user meets first (issue #23): the CLI's version, the tasks commands in a fresh
// directory and against a router without quotas, a port already in use, a backend that refuses
// connections at start, and the shipped example config.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadRouterConfig } from '../src/commands/serve.js';
import { backend, engine, router, settings } from './helpers.js';

const CLI = ['--import', 'tsx', 'src/cli.ts'];
const run = (args: string[]): ReturnType<typeof spawnSync> =>
  spawnSync(process.execPath, [...CLI, ...args], { encoding: 'utf8', timeout: 60_000 });

test('llmlb --version prints the package version', () => {
  const r = run(['--version']);
  assert.equal(r.status, 0);
  const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
  assert.equal(String(r.stdout).trim(), pkg.version);
});

test('tasks migrate, add and status work in a directory that does not exist yet', () => {
  const dir = join(mkdtempSync(join(tmpdir(), 'llmlb-first-')), 'state', 'tasks-db');
  const m = run(['tasks', 'migrate', '--data-dir', dir]);
  assert.equal(m.status, 0, String(m.stderr));
  const a = run(['tasks', 'add', '--data-dir', join(dir, 'other'), '--prompt', 'hi']);
  assert.equal(a.status, 0, String(a.stderr));
  const s = run(['tasks', 'status', '--data-dir', join(dir, 'other')]);
  assert.equal(s.status, 0, String(s.stderr));
  assert.deepEqual(JSON.parse(String(s.stdout)), { queued: 1, running: 0, done: 0, dead: 0 });
});

test('tasks run against a router without quotas says what to do, exits 2 and kills no task', async () => {
  const e = await engine();
  const { router: r, url } = await router(settings([backend('a', e.url)]));
  try {
    const dir = mkdtempSync(join(tmpdir(), 'llmlb-first-'));
    assert.equal(run(['tasks', 'add', '--data-dir', dir, '--prompt', 'a', '--prompt', 'b']).status, 0);
    const child = spawn(
      process.execPath,
      [...CLI, 'tasks', 'run', '--data-dir', dir, '--router', url, '--drain'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    assert.equal(code, 2, stderr);
    assert.match(stderr, /no model quotas are configured/);
    assert.match(stderr, /--no-admission --model/);
    assert.equal(stderr.trim().split('\n').length, 1, stderr);
    const s = run(['tasks', 'status', '--data-dir', dir]);
    assert.deepEqual(JSON.parse(String(s.stdout)), { queued: 2, running: 0, done: 0, dead: 0 });
  } finally {
    await r.close();
    await e.close();
  }
});

test('a port in use is one line naming the port and the flag, exit 2', async () => {
  const holder: Server = createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  const port = (holder.address() as { port: number }).port;
  try {
    const r = run(['engine', '--port', String(port)]);
    assert.equal(r.status, 2);
    assert.equal(
      String(r.stderr).trim(),
      `llmlb: port ${port} is already in use; choose another with --port`,
    );
    const s = run(['serve', '--config', 'examples/llmlb.yaml', '--port', String(port)]);
    assert.equal(s.status, 2);
    assert.match(
      String(s.stderr),
      new RegExp(`^llmlb: port ${port} is already in use; choose another with --port`),
    );
    assert.equal(String(s.stderr).trim().split('\n').length, 1, String(s.stderr));
  } finally {
    holder.close();
  }
});

test('a backend refusing connections is not healthy once the router is listening', async () => {
  const holder: Server = createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  const deadPort = (holder.address() as { port: number }).port;
  await new Promise<void>((resolve) => holder.close(() => resolve())); // nothing listens there now
  const e = await engine();
  const { router: r, url } = await router(
    settings([backend('up', e.url), backend('dead', `http://127.0.0.1:${deadPort}`)], {
      health: { failuresToEject: 3, probeIntervalMs: 60_000, probeTimeoutMs: 500, scrapeIntervalMs: 60_000 },
    }),
  );
  try {
    assert.equal(r.scheduler.backend('up')?.healthy, true);
    assert.equal(r.scheduler.backend('dead')?.healthy, false);
    const h = (await (await fetch(`${url}/healthz`)).json()) as { backends: number; healthy: number };
    assert.equal(h.backends, 2);
    assert.equal(h.healthy, 1);
  } finally {
    await r.close();
    await e.close();
  }
});

test('examples/llmlb.yaml (two local Ollama servers) loads as is and serve starts with it', async () => {
  const s = loadRouterConfig('examples/llmlb.yaml', {});
  assert.deepEqual(
    s.backends.map((b) => [b.name, b.url, b.api]),
    [
      ['ollama-1', 'http://127.0.0.1:11434', 'ollama'],
      ['ollama-2', 'http://127.0.0.1:11435', 'ollama'],
    ],
  );
  const child = spawn(process.execPath, [...CLI, 'serve', '--config', 'examples/llmlb.yaml', '--port', '0'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  try {
    const line = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (c: Buffer) => {
        out += c.toString();
        const m = /llmlb listening on (\S+)/.exec(out);
        if (m) resolve(m[1]!);
      });
      child.on('close', (code) => reject(new Error(`serve exited ${code}`)));
    });
    const root = await fetch(`${line}/`);
    assert.equal(await root.text(), 'Ollama is running');
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => child.on('close', resolve));
  }
});
