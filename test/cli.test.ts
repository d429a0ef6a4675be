import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { engine } from './helpers.js';

const CLI = ['--import', 'tsx', 'src/cli.ts'];

function tmp(name: string, text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-cli-'));
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
}

test('serve exits 2 naming the bad field and line', () => {
  const p = tmp('bad.yaml', 'server:\n  port: 8080\nbackends:\n  - name: a\n    url: not-a-url\n');
  const r = spawnSync(process.execPath, [...CLI, 'serve', '--config', p], { encoding: 'utf8' });
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /backends\[0\]\.url/);
  assert.match(r.stderr, /line 5/);
});

test('bad arguments exit 2', () => {
  const r = spawnSync(process.execPath, [...CLI, 'serve'], { encoding: 'utf8' });
  assert.equal(r.status, 2);
  const e = spawnSync(process.execPath, [...CLI, 'engine', '--port', 'x'], { encoding: 'utf8' });
  assert.equal(e.status, 2);
  assert.match(e.stderr, /--port/);
});

test('serve prints its address when ready and proxies; LLMLB_* and flags override', async () => {
  const up = await engine();
  const p = tmp(
    'ok.yaml',
    `server: { port: 1 }\nbackends:\n  - { name: a, url: "${up.url}", models: [m1] }\nadmin: { token: s3cr3t-t0ken }\n`,
  );
  const child = spawn(process.execPath, [...CLI, 'serve', '--config', p, '--port', '0'], {
    env: { ...process.env, LLMLB_HOST: '127.0.0.1', LLMLB_LOG_LEVEL: 'warn' },
  });
  try {
    const out = await new Promise<string>((resolve, reject) => {
      let text = '';
      child.stdout.on('data', (d: Buffer) => {
        text += d.toString();
        if (/^dashboard: .*\n/m.test(text)) resolve(text);
      });
      child.on('exit', (code) => reject(new Error(`exited ${code}: ${text}`)));
    });
    const url = /llmlb listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out)![1]!;
    // Its dashboard address, never the admin token.
    assert.ok(out.includes(`\ndashboard: ${url}/dashboard\n`), out);
    assert.ok(!out.includes('s3cr3t-t0ken'), out);
    const res = await fetch(`${url}/api/generate`, {
      method: 'POST',
      body: '{"model":"m1","prompt":"x","stream":false}',
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-llmlb-backend'), 'a');
    await res.arrayBuffer();
  } finally {
    child.kill('SIGTERM');
    await up.close();
  }
});

test('hot reload: a valid edit applies (SIGHUP or file change), an invalid one is rejected and the old config stays', async () => {
  const up = await engine();
  const up2 = await engine();
  const p = tmp(
    'reload.yaml',
    `backends:\n  - { name: a, url: "${up.url}", models: [m1] }\nadmin: { token: t }\n`,
  );
  const child = spawn(process.execPath, [...CLI, 'serve', '--config', p, '--port', '0'], {
    env: { ...process.env, LLMLB_LOG_LEVEL: 'info' },
  });
  let logs = '';
  child.stdout.on('data', (d: Buffer) => (logs += d.toString()));
  const names = async (url: string): Promise<string[]> => {
    const s = (await (
      await fetch(`${url}/admin/backends`, { headers: { authorization: 'Bearer t' } })
    ).json()) as {
      backends: { name: string }[];
    };
    return s.backends.map((b) => b.name);
  };
  const until = async (cond: () => Promise<boolean> | boolean, what: string): Promise<void> => {
    const end = Date.now() + 5000;
    while (!(await cond())) {
      if (Date.now() > end) throw new Error(`timed out: ${what}\n${logs}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  try {
    await until(() => /listening on/.test(logs), 'start');
    const url = /llmlb listening on (http:\/\/[\d.:]+)/.exec(logs)![1]!;
    assert.deepEqual(await names(url), ['a']);
    // invalid edit: rejected, old config kept
    writeFileSync(
      p,
      `backends:\n  - { name: a, url: "${up.url}", models: [m1], bogus: 1 }\nadmin: { token: t }\n`,
    );
    await until(() => /config reload rejected/.test(logs), 'rejection logged');
    assert.match(logs, /bogus/);
    assert.deepEqual(await names(url), ['a']);
    // valid edit via the file watcher
    writeFileSync(
      p,
      `backends:\n  - { name: a, url: "${up.url}", models: [m1] }\n  - { name: b, url: "${up2.url}", models: [m1] }\nadmin: { token: t }\n`,
    );
    await until(async () => (await names(url)).length === 2, 'backend b added');
    // SIGHUP after an edit that removes a
    writeFileSync(p, `backends:\n  - { name: b, url: "${up2.url}", models: [m1] }\nadmin: { token: t }\n`);
    child.kill('SIGHUP');
    await until(async () => (await names(url)).join() === 'b', 'backend a removed');
  } finally {
    child.kill('SIGTERM');
    await Promise.all([up.close(), up2.close()]);
  }
});

test('profile: an unreachable backend is one line on stderr naming the command, exit 1', async () => {
  const { createServer } = await import('node:net');
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  const r = spawnSync(
    process.execPath,
    [...CLI, 'profile', '--backend', `http://127.0.0.1:${port}`, '--model', 'm', '--out', tmp('p.yaml', '')],
    { encoding: 'utf8' },
  );
  assert.equal(r.status, 1, r.stderr);
  assert.equal(r.stderr, `llmlb profile: cannot reach http://127.0.0.1:${port}: connection refused\n`);
});

test('simulate takes its scenario as its argument or by --scenario; two different files are a usage error', () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-cli-sim-'));
  const scenario = 'scenarios/small-exhaustive.yaml';
  const run = (...args: string[]) =>
    spawnSync(process.execPath, [...CLI, 'simulate', ...args], { encoding: 'utf8' });
  const ok = run(scenario, '--scenario', `./${scenario}`, '--out', join(dir, 'a'));
  assert.equal(ok.status, 0, ok.stderr);
  assert.ok(existsSync(join(dir, 'a', 'results.json')));
  const both = run(scenario, '--scenario', 'scenarios/mixed-4x.yaml', '--out', join(dir, 'b'));
  assert.equal(both.status, 2);
  assert.match(both.stderr, /two different files given, 'scenarios\/small-exhaustive\.yaml' and --scenario/);
  const none = run('--out', join(dir, 'c'));
  assert.equal(none.status, 2);
  assert.match(none.stderr, /simulate needs a file: llmlb simulate FILE \(or --scenario FILE\)/);
  const missing = run('no-such-scenario.yaml', '--out', join(dir, 'd'));
  assert.equal(missing.status, 2);
  assert.equal(missing.stderr, 'llmlb: scenario file not found: no-such-scenario.yaml\n');
});

test('whatif: its trace as the argument; a missing one is "trace file not found", exit 2', () => {
  const config = tmp('w.yaml', 'backends:\n  - { name: a, url: http://127.0.0.1:1, models: [m] }\n');
  const r = spawnSync(process.execPath, [...CLI, 'whatif', 'no-such-trace.jsonl', '--config', config], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 2, r.stderr);
  assert.equal(r.stderr, 'llmlb: trace file not found: no-such-trace.jsonl\n');
});

test('trace generate: Mooncake lines on stdout; a bad shape exits 2 naming the flag', () => {
  const r = spawnSync(
    process.execPath,
    [...CLI, 'trace', 'generate', '--shape', 'agents', '--rate', '1', '--duration', '20', '--seed', '2'],
    { encoding: 'utf8' },
  );
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.trim().split('\n');
  assert.ok(lines.length > 5, r.stdout);
  for (const l of lines) assert.ok(Array.isArray((JSON.parse(l) as { hash_ids: unknown }).hash_ids));
  const bad = spawnSync(process.execPath, [...CLI, 'trace', 'generate', '--shape', 'novels'], {
    encoding: 'utf8',
  });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--shape/);
});
