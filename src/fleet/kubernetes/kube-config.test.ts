import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { kubernetesDiscoverySchema } from '../../config/kubernetes-discovery.js';
import { kubeConfigFor } from './kube-config.js';

const cfg = (over: Record<string, unknown> = {}) =>
  kubernetesDiscoverySchema.parse({ inferencePool: 'pool', ...over });

test("in a pod: the service account's server, token (trimmed, re-read on refresh), CA and namespace", (t) => {
  const sa = mkdtempSync(join(tmpdir(), 'llmlb-sa-'));
  t.after(() => rmSync(sa, { recursive: true, force: true }));
  writeFileSync(join(sa, 'token'), 'tok-1\n');
  writeFileSync(join(sa, 'ca.crt'), 'not a real CA');
  writeFileSync(join(sa, 'namespace'), 'inference\n');
  const { kc, namespace, refresh } = kubeConfigFor(
    cfg(),
    { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '6443' },
    sa,
  );
  assert.equal(namespace, 'inference');
  assert.equal(kc.getCurrentCluster()?.server, 'https://[fd00::1]:6443');
  assert.equal(kc.getCurrentCluster()?.caFile, join(sa, 'ca.crt'));
  assert.equal(kc.getCurrentCluster()?.skipTLSVerify, false);
  assert.equal(kc.getCurrentUser()?.token, 'tok-1');
  writeFileSync(join(sa, 'token'), 'tok-2');
  refresh();
  assert.equal(kc.getCurrentUser()?.token, 'tok-2');
});

test('outside a pod: apiServer is needed; given settings win over the service account', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'llmlb-sa-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  assert.throws(() => kubeConfigFor(cfg(), {}, join(dir, 'none')), /set apiServer, or run in a pod/);
  const plain = kubeConfigFor(
    cfg({ apiServer: 'http://127.0.0.1:8001/', namespace: 'x' }),
    {},
    join(dir, 'none'),
  );
  assert.equal(plain.kc.getCurrentCluster()?.server, 'http://127.0.0.1:8001');
  assert.equal(plain.kc.getCurrentUser()?.token, undefined, 'kubectl proxy: no token');
  assert.equal(plain.namespace, 'x');
  assert.equal(
    kubeConfigFor(cfg({ apiServer: 'https://k:6443' }), {}, join(dir, 'none')).namespace,
    'default',
  );
});
