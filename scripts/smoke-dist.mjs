// CI smoke test of the built CLI (dist/cli.js), as a user runs it: no tsx, no test files. Checks that
// dist holds no tests or test helpers, that --help works, that `simulate` runs a tiny scenario, and
// that `serve` starts, answers, and stops on SIGTERM.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const cli = 'dist/cli.js';
const fail = (msg) => {
  console.error(`smoke: ${msg}`);
  process.exit(1);
};
if (!existsSync(cli)) fail(`${cli} is missing: run npm run build first`);

const stray = [];
(function walk(dir) {
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) walk(p);
    else if (/\.test\.js$|\.suite\.js$|(^|[./])testing\.js$/.test(e)) stray.push(p);
  }
})('dist');
if (stray.length > 0) fail(`dist holds test code: ${stray.join(', ')}`);

/** A port nobody listens on now. */
function freePort() {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
}

const run = (args) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 60_000 });
const help = run(['--help']);
if (help.status !== 0 || !/serve/.test(help.stdout)) fail(`--help: ${help.status} ${help.stderr}`);

const dir = mkdtempSync(join(tmpdir(), 'llmlb-smoke-'));
try {
  const scenario = join(dir, 'tiny.yaml');
  writeFileSync(
    scenario,
    'name: tiny\ndurationS: 20\nfleet:\n  - name: a\n  - name: b\nworkload: { type: constant, rate: 0.5 }\npolicies: [round-robin, least-connections]\n',
  );
  const sim = run(['simulate', '--scenario', scenario, '--out', join(dir, 'out')]);
  if (sim.status !== 0) fail(`simulate exited ${sim.status}: ${sim.stderr}`);
  if (!existsSync(join(dir, 'out', 'results.json'))) fail('simulate wrote no results.json');

  const port = await freePort();
  const config = join(dir, 'router.yaml');
  // A backend nobody listens on: the router must still start (it marks it down) and stop cleanly.
  writeFileSync(
    config,
    `backends:\n  - name: a\n    url: http://127.0.0.1:9\n    models: [m]\npolicy: least-connections\n`,
  );
  const serve = spawn(process.execPath, [cli, 'serve', '--config', config, '--port', String(port)], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  serve.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise((resolve) => serve.on('exit', (code, signal) => resolve({ code, signal })));
  let up = false;
  for (let i = 0; i < 100 && !up; i++) {
    await new Promise((r) => setTimeout(r, 100));
    up = await fetch(`http://127.0.0.1:${port}/metrics`).then(
      (r) => r.status === 200,
      () => false,
    );
  }
  if (!up) {
    serve.kill('SIGKILL');
    fail(`serve did not answer /metrics on port ${port}: ${stderr}`);
  }
  serve.kill('SIGTERM');
  const timer = setTimeout(() => serve.kill('SIGKILL'), 10_000);
  const end = await exited;
  clearTimeout(timer);
  if (end.code !== 0) fail(`serve did not stop cleanly on SIGTERM: ${JSON.stringify(end)} ${stderr}`);

  // `epp` loads the vendored protos (proto/ beside dist/) and answers grpc.health.v1.
  const [httpPort, eppPort, healthPort] = [await freePort(), await freePort(), await freePort()];
  const eppConfig = join(dir, 'epp.yaml');
  writeFileSync(
    eppConfig,
    `server: { port: ${httpPort} }\nepp: { port: ${eppPort}, healthPort: ${healthPort} }\nbackends:\n  - name: a\n    url: http://127.0.0.1:9\n    models: [m]\n`,
  );
  const epp = spawn(process.execPath, [cli, 'epp', '--config', eppConfig], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let eppOut = '';
  epp.stdout.on('data', (d) => (eppOut += d));
  epp.stderr.on('data', (d) => (eppOut += d));
  const eppExited = new Promise((resolve) => epp.on('exit', (code, signal) => resolve({ code, signal })));
  for (let i = 0; i < 100 && !eppOut.includes('llmlb epp listening'); i++)
    await new Promise((r) => setTimeout(r, 100));
  if (!eppOut.includes('llmlb epp listening')) {
    epp.kill('SIGKILL');
    fail(`epp did not start: ${eppOut}`);
  }
  const grpc = await import('@grpc/grpc-js');
  const loader = await import('@grpc/proto-loader');
  const def = loader.loadSync('grpc/health/v1/health.proto', { includeDirs: ['proto'], enums: String });
  const { Health } = grpc.loadPackageDefinition(def).grpc.health.v1;
  const status = await new Promise((resolve) => {
    const c = new Health(`127.0.0.1:${healthPort}`, grpc.credentials.createInsecure());
    c.Check({ service: 'liveness' }, (err, r) => {
      c.close();
      resolve(err ? String(err) : r.status);
    });
  });
  if (status !== 'SERVING') fail(`epp health on ${healthPort}: ${status} ${eppOut}`);
  epp.kill('SIGTERM');
  const eppTimer = setTimeout(() => epp.kill('SIGKILL'), 10_000);
  const eppEnd = await eppExited;
  clearTimeout(eppTimer);
  if (eppEnd.code !== 0) fail(`epp did not stop cleanly on SIGTERM: ${JSON.stringify(eppEnd)} ${eppOut}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log('smoke: dist/cli.js --help, simulate, serve and epp ok; dist holds no test code');
