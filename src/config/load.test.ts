import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { configIssues } from './testing.js';
import {
  ConfigError,
  applyOverrides,
  loadConfigFile,
  parseBackendEntry,
  parseConfig,
  type ConfigIssue,
  type ParseOptions,
} from './load.js';

const opts: ParseOptions = {
  knownPolicies: ['round-robin', 'least-connections', 'estimated-wait'],
  source: 't.yaml',
};

const issues = (text: string, o = opts): ConfigIssue[] => configIssues(text, o);

const minimal = 'backends:\n  - name: a\n    url: http://127.0.0.1:11434\n';

test('a minimal file gets every default', () => {
  const c = parseConfig(minimal, opts);
  assert.deepEqual(c.server, {
    host: '127.0.0.1',
    port: 8080,
    maxBodyBytes: 10485760,
    maxJsonDepth: 128,
    taskHintHeader: 'x-llmlb-task',
  });
  assert.deepEqual(c.backends, [
    {
      name: 'a',
      url: 'http://127.0.0.1:11434',
      api: 'ollama',
      models: undefined,
      maxConcurrency: Infinity,
      weight: 1,
      streamUsage: true,
      region: undefined,
    },
  ]);
  assert.deepEqual(c.policy, { name: 'estimated-wait', params: {} });
  assert.deepEqual(c.retry, { attempts: 4, backoffMs: 25 });
  assert.deepEqual(c.timeouts, { connectMs: 5000, firstByteMs: 600000, idleMs: 120000, bodyMs: 30000 });
  assert.deepEqual([c.health.stallMinMs, c.health.stallFactor, c.health.quarantineMs], [10_000, 10, 30_000]);
  assert.equal(c.queue.maxLength, 10000);
  assert.equal(c.log.prompts, false);
  assert.equal(c.admin, undefined);
});

test('a full file, and the same as JSON, give the same config', () => {
  const yaml = `
server: { host: 0.0.0.0, port: 9000, maxBodyBytes: 1000 }
backends:
  - { name: gpu-a, url: "http://10.0.0.1:11434/", api: ollama, models: [llama3], maxConcurrency: 4, weight: 2, region: us-east }
  - { name: vllm, url: "http://10.0.0.2:8000", api: openai }
policy: { name: estimated-wait, alpha: 0.3 }
retry: { attempts: 2 }
admin: { token: secret }
log: { level: debug, prompts: true }
`;
  const c = parseConfig(yaml, opts);
  assert.equal(c.backends[0]?.url, 'http://10.0.0.1:11434');
  assert.equal(c.backends[0]?.maxConcurrency, 4);
  assert.equal(c.backends[1]?.api, 'openai');
  assert.deepEqual(c.policy, { name: 'estimated-wait', params: { alpha: 0.3 } });
  assert.equal(c.retry.backoffMs, 25);
  const json = JSON.stringify({
    server: { host: '0.0.0.0', port: 9000, maxBodyBytes: 1000 },
    backends: [
      {
        name: 'gpu-a',
        url: 'http://10.0.0.1:11434/',
        api: 'ollama',
        models: ['llama3'],
        maxConcurrency: 4,
        weight: 2,
        region: 'us-east',
      },
      { name: 'vllm', url: 'http://10.0.0.2:8000', api: 'openai' },
    ],
    policy: { name: 'estimated-wait', alpha: 0.3 },
    retry: { attempts: 2 },
    admin: { token: 'secret' },
    log: { level: 'debug', prompts: true },
  });
  assert.deepEqual(parseConfig(json, opts), c);
});

test('unknown keys are rejected at every level, with their line', () => {
  assert.deepEqual(issues(`${minimal}bogus: 1\n`), [{ path: 'bogus', message: 'unknown key', line: 4 }]);
  const nested = issues(
    'server:\n  port: 1\n  prot: 2\nbackends:\n  - name: a\n    url: http://x:1\n    modles: [m]\n',
  );
  assert.deepEqual(
    nested.map((i) => [i.path, i.line, i.message]),
    [
      ['server.prot', 3, 'unknown key; did you mean `port`?'],
      ['backends[0].modles', 7, 'unknown key; did you mean `models`?'],
    ],
  );
  // A typo of a top-level key, and one far from any: only the close one gets a suggestion.
  assert.equal(issues(`${minimal}polcy: jsq\n`)[0]?.message, 'unknown key; did you mean `policy`?');
  assert.equal(issues(`${minimal}frobnicate: 1\n`)[0]?.message, 'unknown key');
});

test('wrong types, bad urls, empty fleets and duplicate names name the field', () => {
  const t = issues('server:\n  port: "x"\nbackends:\n  - name: a\n    url: not-a-url\n');
  assert.deepEqual(
    t.map((i) => [i.path, i.line]),
    [
      ['server.port', 2],
      ['backends[0].url', 5],
    ],
  );
  assert.equal(issues('backends: []\n')[0]?.path, 'backends');
  assert.match(issues('server: {}\n')[0]?.path ?? '', /backends/);
  const dup = issues('backends:\n  - { name: a, url: "http://x:1" }\n  - { name: a, url: "http://y:1" }\n');
  assert.deepEqual(
    dup.map((i) => [i.path, i.line]),
    [['backends[1].name', 3]],
  );
  assert.match(dup[0]!.message, /duplicate backend name 'a'/);
  assert.equal(issues(`${minimal}  - { name: b, url: "ftp://x" }\n`)[0]?.path, 'backends[1].url');
  assert.equal(
    issues(`${minimal}  - { name: c, url: "http://x:1", maxConcurrency: 0 }\n`)[0]?.path,
    'backends[1].maxConcurrency',
  );
});

test('every problem is reported at once, in file order', () => {
  const all = issues(
    'backends:\n  - { name: a, url: "nope" }\n  - { name: a, url: "http://y:1", wieght: 2 }\npolicy: zzz\n',
  );
  assert.deepEqual(
    all.map((i) => [i.path, i.line]),
    [
      ['backends[0].url', 2],
      ['backends[1].wieght', 3],
      ['backends[1].name', 3],
      ['policy', 4],
    ],
  );
  const missing = issues('backends:\n  - name: a\n');
  assert.deepEqual(missing, [{ path: 'backends[0].url', message: 'required', line: 2 }]);
  assert.match(issues('backends:\n  - { name: a, url: "http://x:1?q=1" }\n')[0]!.message, /query/);
  assert.equal(issues('42\n')[0]?.path, '');
});

test('unknown policies and bad policy parameters are reported on `policy`', () => {
  const u = issues(`${minimal}policy: fastest\n`);
  assert.deepEqual([u[0]?.path, u[0]?.line], ['policy', 4]);
  assert.match(u[0]!.message, /unknown policy 'fastest' \(known: round-robin/);
  const p = issues(`${minimal}policy: { name: estimated-wait, alpha: 9 }\n`, {
    ...opts,
    validatePolicy: (s) => {
      if ((s.params.alpha as number) > 1) throw new Error('alpha must be ≤ 1');
    },
  });
  assert.deepEqual([p[0]?.path, p[0]?.message], ['policy', 'alpha must be ≤ 1']);
  const shape = issues(`${minimal}policy: { alpha: 1 }\n`);
  assert.deepEqual([shape[0]?.path, shape[0]?.line], ['policy', 4]);
  assert.match(shape[0]!.message, /policy name or an object/);
  // The default policy must be one the build knows too.
  const d = issues(minimal, { knownPolicies: ['round-robin'] });
  assert.match(d[0]!.message, /unknown policy 'estimated-wait'.*the default/);
  const ok = parseConfig(`${minimal}policy: { name: round-robin, seed: 3, nested: { a: [1] } }\n`, opts);
  assert.deepEqual(ok.policy, { name: 'round-robin', params: { seed: 3, nested: { a: [1] } } });
  assert.deepEqual(parseConfig(`${minimal}policy: least-connections\n`, opts).policy, {
    name: 'least-connections',
    params: {},
  });
});

test('YAML syntax errors carry their line and column', () => {
  const e = issues('backends:\n  - name: a\n    url: [unclosed\n');
  assert.equal(e.length >= 1, true);
  assert.ok(e[0]?.line !== undefined && e[0].line >= 3, JSON.stringify(e));
  const bad = issues('backends:\n  - name: a\n   url: http://x:1\n');
  assert.deepEqual(bad[0], { path: '', message: 'Sequence item without - indicator', line: 3, column: 1 });
  assert.throws(() => parseConfig('backends:\n  - name: a\n   url: x\n', opts), /\(line 3, column 1\)/);
  assert.deepEqual(
    issues('backends: []\nbackends: []\n').map((i) => [i.message, i.line]),
    [['Map keys must be unique', 2]],
  );
  assert.throws(() => parseConfig('{"backends": [', opts), ConfigError);
});

test('a .json file is held to JSON, with line and column', () => {
  const trailingComma = '{\n  "backends": [\n    {"name": "a",}\n  ]\n}\n';
  const j = issues(trailingComma, { ...opts, source: 'c.json' });
  assert.deepEqual([j[0]?.line, j[0]?.column], [3, 18]);
  assert.match(j[0]!.message, /JSON/);
  const eof = issues('{"backends": [', { ...opts, source: 'c.json' });
  assert.deepEqual([eof[0]?.line, eof[0]?.column], [1, 15]);
  // Equal keys are kept silently by JSON.parse; here they are an error.
  const dup = issues('{\n "backends": [],\n "backends": []\n}', { ...opts, source: 'c.json' });
  assert.deepEqual([dup[0]?.message, dup[0]?.line], ['Map keys must be unique', 3]);
  // Field errors in JSON still name the field and its line.
  const field = issues('{\n  "backends": [\n    {"name": "a", "url": "http://x:1", "weight": -1}\n  ]\n}\n', {
    ...opts,
    source: 'c.json',
  });
  assert.deepEqual([field[0]?.path, field[0]?.line], ['backends[0].weight', 3]);
});

test('env and CLI overrides: flags over env over file; bad values name the variable', () => {
  const c = parseConfig(minimal, opts);
  const env = {
    LLMLB_HOST: '0.0.0.0',
    LLMLB_PORT: '9001',
    LLMLB_POLICY: 'round-robin',
    LLMLB_ADMIN_TOKEN: 't',
    LLMLB_LOG_LEVEL: 'warn',
    LLMLB_RETRY_ATTEMPTS: '2',
  };
  const o = applyOverrides(c, env, {}, opts);
  assert.deepEqual(
    [o.server.host, o.server.port, o.policy.name, o.admin?.token, o.log.level, o.retry.attempts],
    ['0.0.0.0', 9001, 'round-robin', 't', 'warn', 2],
  );
  const f = applyOverrides(c, env, { host: '::1', port: 7 }, opts);
  assert.deepEqual([f.server.host, f.server.port], ['::1', 7]);
  assert.equal(c.server.port, 8080, 'the original is not mutated');
  for (const [k, v] of [
    ['LLMLB_PORT', 'abc'],
    ['LLMLB_PORT', '70000'],
    ['LLMLB_RETRY_ATTEMPTS', '0'],
    ['LLMLB_LOG_LEVEL', 'loud'],
    ['LLMLB_POLICY', 'nope'],
  ] as const) {
    assert.throws(
      () => applyOverrides(c, { [k]: v }, {}, opts),
      (err: unknown) => err instanceof ConfigError && err.message.includes(k),
    );
  }
  for (const v of ['1e3', '0x1f', '80.0', '-1', '9001abc']) {
    assert.throws(() => applyOverrides(c, { LLMLB_PORT: v }, {}), /LLMLB_PORT/);
  }
  assert.throws(() => applyOverrides(c, {}, { port: 70000 }), /--port/);
  assert.throws(() => applyOverrides(c, {}, { host: '' }), /--host/);
  // Empty variables are unset; a flag wins even over a bad env value's absence.
  assert.deepEqual(applyOverrides(c, { LLMLB_PORT: '', LLMLB_HOST: '' }, {}), c);
  assert.equal(applyOverrides(c, { LLMLB_PORT: '9001' }, { port: 0 }).server.port, 0);
});

test('LLMLB_POLICY keeps the file params of the same policy, and is validated', () => {
  const c = parseConfig(`${minimal}policy: { name: estimated-wait, alpha: 0.3 }\n`, opts);
  assert.deepEqual(applyOverrides(c, { LLMLB_POLICY: 'estimated-wait' }, {}, opts).policy, c.policy);
  assert.deepEqual(applyOverrides(c, { LLMLB_POLICY: 'round-robin' }, {}, opts).policy, {
    name: 'round-robin',
    params: {},
  });
  const seen: string[] = [];
  assert.throws(
    () =>
      applyOverrides(
        c,
        { LLMLB_POLICY: 'round-robin' },
        {},
        {
          ...opts,
          validatePolicy: (s) => {
            seen.push(s.name);
            throw new Error('not in this build');
          },
        },
      ),
    /LLMLB_POLICY: not in this build/,
  );
  assert.deepEqual(seen, ['round-robin']);
});

test('loadConfigFile reads YAML and JSON files and names a missing one', () => {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-config-'));
  try {
    const yamlPath = join(dir, 'router.yaml');
    const jsonPath = join(dir, 'router.json');
    writeFileSync(yamlPath, minimal);
    writeFileSync(jsonPath, JSON.stringify({ backends: [{ name: 'a', url: 'http://127.0.0.1:11434' }] }));
    assert.deepEqual(loadConfigFile(jsonPath, opts), loadConfigFile(yamlPath, opts));
    const missing = join(dir, 'nope.yaml');
    assert.throws(
      () => loadConfigFile(missing, opts),
      (err: unknown) =>
        err instanceof ConfigError && err.source === missing && /file not found/.test(err.message),
    );
    writeFileSync(yamlPath, `${minimal}bogus: 1\n`);
    assert.throws(() => loadConfigFile(yamlPath, opts), /router\.yaml[\s\S]*bogus \(line 4\): unknown key/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('one backend entry for the admin API, validated the same way', () => {
  assert.equal(parseBackendEntry({ name: 'x', url: 'http://h:1', models: ['m'] }).maxConcurrency, Infinity);
  assert.throws(() => parseBackendEntry({ name: 'x', url: 'nope' }), /url/);
  assert.throws(() => parseBackendEntry({ name: 'x', url: 'http://h:1', extra: 1 }), /extra.*unknown key/);
});

test('admin.listen: host:port, [v6]:port or a bare port (loopback); anything else is named', () => {
  const listen = (v: string): unknown =>
    parseConfig(`${minimal}admin: { listen: "${v}" }\n`, opts).admin?.listen;
  assert.deepEqual(listen('127.0.0.1:9090'), { host: '127.0.0.1', port: 9090 });
  assert.deepEqual(listen('[::1]:9090'), { host: '::1', port: 9090 });
  assert.deepEqual(listen('9090'), { host: '127.0.0.1', port: 9090 });
  assert.deepEqual(listen(':0'), { host: '127.0.0.1', port: 0 });
  assert.deepEqual(parseConfig(`${minimal}admin: { listen: 9091, token: s }\n`, opts).admin, {
    token: 's',
    listen: { host: '127.0.0.1', port: 9091 },
  });
  for (const bad of ['127.0.0.1:99999', 'host:', 'a b:1', 'http://x:1'])
    assert.deepEqual(
      issues(`${minimal}admin: { listen: "${bad}" }\n`).map((i) => i.path),
      ['admin.listen'],
      bad,
    );
});

test('a pinned policy must name a backend of the file', () => {
  const o: ParseOptions = { ...opts, knownPolicies: [...opts.knownPolicies, 'pinned'] };
  assert.equal(parseConfig(`${minimal}policy: { name: pinned, backend: a }\n`, o).policy.name, 'pinned');
  assert.deepEqual(issues(`${minimal}policy: { name: pinned, backend: nope }\n`, o), [
    { path: 'policy.backend', message: "names unknown backend 'nope'", line: 4 },
  ]);
});

test('objectives: InferenceObjective priorities by name (integers); absent by default', () => {
  assert.equal(parseConfig(minimal, opts).objectives, undefined);
  const c = parseConfig(
    `${minimal}objectives:\n  critical: { priority: 10 }\n  batch: { priority: -5 }\n`,
    opts,
  );
  assert.deepEqual(c.objectives, { critical: { priority: 10 }, batch: { priority: -5 } });
  assert.ok(issues(`${minimal}objectives:\n  x: { priority: 1.5 }\n`).length > 0);
  assert.ok(issues(`${minimal}objectives:\n  x: { priority: 1, slo: 3 }\n`).length > 0);
});
