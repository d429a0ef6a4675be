// /admin/decisions for estimated-wait (issue #23): each decision carries the per-backend
// estimates that decided it, not an empty scorer list.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backend, engine, post, router, settings } from './helpers.js';

interface Decisions {
  decisions: {
    backend: string | null;
    scores?: { backends: string[]; scorers: { name: string; scores: number[] }[]; picked: string[] };
  }[];
}

test('estimated-wait decisions show each candidate’s estimated seconds to finish', async () => {
  const [a, b] = await Promise.all([engine(), engine()]);
  const { router: r, url } = await router(
    settings([backend('a', a.url), backend('b', b.url)], {
      policy: { name: 'estimated-wait', params: {} },
      admin: { token: 't' },
    }),
  );
  try {
    for (let i = 0; i < 3; i++)
      await (
        await post(`${url}/api/generate`, { model: 'm1', prompt: `q${i}`, stream: false })
      ).arrayBuffer();
    const res = await fetch(`${url}/admin/decisions`, { headers: { authorization: 'Bearer t' } });
    assert.equal(res.status, 200);
    const d = ((await res.json()) as Decisions).decisions[0]!;
    const s = d.scores!;
    assert.deepEqual([...s.backends].sort(), ['a', 'b']);
    const est = s.scorers.find((x) => x.name === 'estimated-wait: seconds to finish');
    assert.ok(est, JSON.stringify(s));
    assert.equal(est.scores.length, 2);
    assert.ok(est.scores.every((x) => Number.isFinite(x) && x >= 0));
    assert.equal(s.picked[0], d.backend);
  } finally {
    await r.close();
    await Promise.all([a.close(), b.close()]);
  }
});
