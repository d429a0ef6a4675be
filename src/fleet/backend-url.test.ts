import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseBackendUrl } from './backend-url.js';

test('an origin alone has no path prefix, with or without a trailing slash', () => {
  assert.deepEqual(parseBackendUrl('http://h:8000', 'openai'), {
    ok: true,
    origin: 'http://h:8000',
    basePath: '',
  });
  assert.deepEqual(parseBackendUrl('https://h/', 'ollama'), { ok: true, origin: 'https://h', basePath: '' });
});

test('/v1 at the end is understood for api: openai (the router appends /v1/... itself)', () => {
  for (const u of ['http://h:8000/v1', 'http://h:8000/v1/', 'http://h:8000/v1//'])
    assert.deepEqual(parseBackendUrl(u, 'openai'), { ok: true, origin: 'http://h:8000', basePath: '' }, u);
  assert.deepEqual(parseBackendUrl('http://h/vllm/a/v1', 'openai'), {
    ok: true,
    origin: 'http://h',
    basePath: '/vllm/a',
  });
});

test('any other path prefix is kept, /v1 included for an Ollama backend', () => {
  assert.deepEqual(parseBackendUrl('http://h/ollama/', 'ollama'), {
    ok: true,
    origin: 'http://h',
    basePath: '/ollama',
  });
  assert.deepEqual(parseBackendUrl('http://h/v1', 'ollama'), {
    ok: true,
    origin: 'http://h',
    basePath: '/v1',
  });
  assert.deepEqual(parseBackendUrl('http://h/v10', 'openai'), {
    ok: true,
    origin: 'http://h',
    basePath: '/v10',
  });
});

test('what cannot be forwarded faithfully is refused with the reason', () => {
  const problem = (u: string): string => {
    const r = parseBackendUrl(u, 'openai');
    assert.equal(r.ok, false, u);
    return r.ok ? '' : r.problem;
  };
  assert.match(problem('http://h/v1?key=1'), /query/);
  assert.match(problem('http://h/v1?'), /query/);
  assert.match(problem('http://h/#x'), /fragment/);
  assert.match(problem('http://user:pw@h/'), /credentials/);
  assert.match(problem('ftp://h/'), /scheme 'ftp'/);
  assert.match(problem('h:8000'), /scheme|not a URL/);
  assert.match(problem('not a url'), /not a URL/);
});
