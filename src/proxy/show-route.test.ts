import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { BackendView } from '../core/types.js';
import { showAvoids } from './show-route.js';

const view = (name: string, api: 'ollama' | 'openai', over: Partial<BackendView> = {}): BackendView =>
  ({ name, api, models: new Set(['m']), healthy: true, draining: false, ...over }) as BackendView;

test('OpenAI-API backends are avoided while an Ollama-API one can serve the model', () => {
  const vs = [
    view('o1', 'ollama'),
    view('v1', 'openai'),
    view('v2', 'openai'),
    view('x', 'openai', { models: new Set() }),
  ];
  assert.deepEqual(showAvoids(vs, 'm', new Set()), ['v1', 'v2']);
});

test('no Ollama-API backend left (none, down, draining, tried or cooling): nothing avoided', () => {
  const v = view('v1', 'openai');
  assert.deepEqual(showAvoids([v], 'm', new Set()), []);
  assert.deepEqual(showAvoids([view('o1', 'ollama', { healthy: false }), v], 'm', new Set()), []);
  assert.deepEqual(showAvoids([view('o1', 'ollama', { draining: true }), v], 'm', new Set()), []);
  assert.deepEqual(showAvoids([view('o1', 'ollama'), v], 'm', new Set(['o1'])), []);
  assert.deepEqual(showAvoids([view('o1', 'ollama', { models: new Set(['n']) }), v], 'm', new Set()), []);
});
