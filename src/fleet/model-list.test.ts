import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseModelList } from './model-list.js';

test('an OpenAI listing: ids are the names, entries with a parent are adapters, junk is skipped', () => {
  const l = parseModelList('openai', {
    data: [
      { id: 'llama3', root: 'llama3', parent: null },
      { id: 'sql-lora', root: '/adapters/sql-lora', parent: 'llama3' },
      { id: 'self', parent: 'self' },
      { object: 'model' },
      'nonsense',
    ],
  });
  assert.deepEqual(l.names, ['llama3', 'sql-lora', 'self']);
  assert.deepEqual(l.adapters, ['sql-lora']);
  assert.deepEqual(
    l.tags.map((t) => t.name),
    ['llama3', 'sql-lora', 'self'],
  );
});

test("an Ollama listing: entries kept whole, a ':latest' name also answers to its bare name", () => {
  const entry = { name: 'llama3:latest', digest: 'abc', size: 5 };
  const l = parseModelList('ollama', { models: [entry, { name: 'qwen2:7b' }, { model: 'no-name' }] });
  assert.deepEqual(l.names, ['llama3:latest', 'llama3', 'qwen2:7b']);
  assert.deepEqual(l.adapters, []);
  assert.equal(l.tags[0], entry);
  assert.equal(l.tags.length, 2);
});

test('a body that is not a listing gives no models', () => {
  assert.deepEqual(parseModelList('openai', { models: [] }).names, []);
  assert.deepEqual(parseModelList('ollama', null).names, []);
});
