import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getLlama, LlamaLogLevel } from 'node-llama-cpp';
import { parameterCount, TINY_SHAPE, tinyVocab, writeTinyLlamaGguf } from './gguf.js';

test('the vocabulary: specials, printable ASCII, ▁ and 256 byte tokens', () => {
  const { tokens, types } = tinyVocab();
  assert.equal(tokens.length, 3 + 94 + 1 + 256);
  assert.equal(types.length, tokens.length);
  assert.equal(new Set(tokens).size, tokens.length);
  assert.equal(tokens.at(-1), '<0xFF>');
});

test('llama.cpp (node-llama-cpp, prebuilt CPU binary) loads the written model and generates', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'llmlb-gguf-'));
  const path = join(dir, 'tiny.gguf');
  try {
    const bytes = await writeTinyLlamaGguf(path, TINY_SHAPE);
    assert.equal((await stat(path)).size, bytes);
    // F32 weights plus a header: at least 4 bytes a parameter.
    assert.ok(bytes >= 4 * parameterCount(TINY_SHAPE));
    const llama = await getLlama({
      gpu: false,
      build: 'never',
      progressLogs: false,
      logLevel: LlamaLogLevel.error,
    });
    try {
      const model = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
      assert.equal(model.fileInfo.metadata.general.architecture, 'llama');
      assert.equal(model.trainContextSize, TINY_SHAPE.contextLength);
      // One token per ASCII character (SentencePiece adds '▁' in front), and back to the same text.
      const text = 'Question 7: why? Answer';
      const toks = model.tokenize(text);
      assert.equal(toks.length, text.length + 1);
      assert.equal(model.detokenize(toks).trim(), text);
      const context = await model.createContext({ contextSize: 256, sequences: 2, threads: 1 });
      const seq = context.getSequence();
      const out: number[] = [];
      for await (const t of seq.evaluate([model.tokens.bos!, ...toks], {
        temperature: 0,
        yieldEogToken: true,
      })) {
        out.push(t);
        if (out.length === 4) break;
      }
      assert.equal(out.length, 4);
      // The sequence's KV cache holds the prompt and the tokens fed back (all but the last sampled).
      assert.equal(seq.nextTokenIndex, 1 + toks.length + 3);
      assert.deepEqual(seq.contextTokens.slice(0, toks.length + 1), [model.tokens.bos!, ...toks]);
      await context.dispose();
      await model.dispose();
    } finally {
      await llama.dispose();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
