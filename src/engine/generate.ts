/**
 * The emulated engine's generation requests: admission (the injected faults: crash, failure,
 * saturation, hang), the request parsed and its output length decided, then submitted to the model
 * and answered from its events through an `Exchange` in the endpoint's wire format.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { endpoint } from '../api/endpoints.js';
import { createRng, deriveSeed } from '../core/rng.js';
import { modelNotFound, servedAs, type EngineContext } from './context.js';
import { Exchange } from './exchange.js';
import { readJson, sendError, sendJson, type Obj } from './http.js';
import { parseGeneration } from './request.js';
import {
  contextBlockHashes,
  countTokens,
  drawOutputTokens,
  outputText,
  promptBlockHashes,
} from './tokens.js';
import { createWire, ollamaLoadBody, type EndpointKind, type ErrorFormat } from './wire.js';

/** The header only the engine reads: the output length a workload generator decided. */
export const OUTPUT_TOKENS_HEADER = 'x-llmlb-output-tokens';

/** Answers one generation request (`body` when the route has read it already). */
export type Generate = (
  kind: EndpointKind,
  req: IncomingMessage,
  res: ServerResponse,
  body?: Obj,
) => Promise<void>;

/**
 * The generation handler of one engine. `crash` plays the `exitAfter` fault: the box gone, sockets
 * and all. Its random streams (output lengths, faults) are its own, seeded from the engine's seed.
 */
export function createGenerate(ctx: EngineContext, crash: () => void): Generate {
  const outputRng = createRng(deriveSeed(ctx.seed, 'output-length'));
  const failRng = createRng(deriveSeed(ctx.seed, 'fail'));
  const { driver, profile } = ctx;
  let seqNo = 0;

  /** Whether a fault answers (or swallows) this request before it reaches the model. */
  function admitted(format: ErrorFormat, res: ServerResponse): boolean {
    const f = ctx.faults;
    if (f.exitAfter !== undefined && ctx.requests > f.exitAfter) {
      crash();
      return false;
    }
    if (failRng() < (f.failRate ?? 0)) {
      sendError(res, format, 500, 'injected failure (llmlb engine fault)', 'injected_failure');
      return false;
    }
    if (f.saturateRate !== undefined && failRng() < f.saturateRate) {
      const extra: Record<string, string> =
        f.retryAfterS !== undefined ? { 'retry-after': String(f.retryAfterS) } : {};
      sendError(res, format, 429, 'busy (llmlb engine fault)', 'saturated', extra);
      return false;
    }
    return !f.hang; // a hang accepts and never answers; the socket closes when the client gives up
  }

  return async (kind, req, res, body) => {
    const format: ErrorFormat = endpoint(kind).family;
    ctx.requests++;
    const f = ctx.faults;
    if (!admitted(format, res)) return;

    const id = `${ctx.name}-${++seqNo}`;
    // Client gone (or stream cut by a fault) before the end: free the slot. After a normal finish the
    // driver has already dropped the sequence, so the cancel is a no-op.
    let gone = false;
    res.on('close', () => {
      gone = true;
      ctx.seqModel.delete(id);
      driver.cancel(id);
    });
    const g = parseGeneration(kind, body ?? (await readJson(req)));
    const served = servedAs(ctx, g.model);
    if (served === undefined) throw modelNotFound(format, g.model);
    if (g.loadOnly) {
      sendJson(res, 200, ollamaLoadBody(g.model, kind === 'ollama-chat'));
      return;
    }

    const hint = Number(req.headers[OUTPUT_TOKENS_HEADER]);
    let outputTokens =
      Number.isInteger(hint) && hint >= 1 ? hint : drawOutputTokens(outputRng, ctx.meanOutput);
    let truncated = false;
    if (g.cap !== undefined && outputTokens > g.cap) {
      truncated = true;
      outputTokens = g.cap;
    }

    const answer = outputText(createRng(deriveSeed(ctx.seed, id)), outputTokens);
    const exchange = new Exchange({
      res,
      wire: createWire(kind, id, g.model, g.includeUsage),
      stream: g.stream,
      answer,
      timeScale: ctx.timeScale,
      truncated,
      dieAfterChunks: g.stream ? f.dieMidStreamAfterChunks : undefined,
    });
    if (gone) return;
    const promptTokens = countTokens(g.text);
    const blockHashes = promptBlockHashes(g.text, profile.blockSize);
    const counts = ctx.perModel.get(served)!;
    ctx.seqModel.set(id, counts);
    driver.submit(
      {
        id,
        promptTokens,
        outputTokens,
        blockHashes,
        contextBlockHashes: contextBlockHashes(g.text, blockHashes, answer, profile.blockSize),
        model: served,
      },
      {
        progress: (total) => exchange.progress(total),
        finished: (ev) => {
          ctx.seqModel.delete(id);
          counts.completed++;
          counts.promptTokens += ev.promptTokens;
          counts.generatedTokens += ev.outputTokens;
          counts.prefixQueries += ev.promptTokens;
          counts.prefixHits += ev.cachedTokens;
          exchange.finished(ev);
        },
      },
    );
  };
}
