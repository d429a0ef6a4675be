import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { z } from 'zod';
import { ConfigMap, Service, ServiceAccount } from 'kubernetes-models/v1';
import { Deployment } from 'kubernetes-models/apps/v1';
import { Role, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { Gateway, HTTPRoute } from '@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1';
import { parseConfig } from '../src/config/load.js';
import { policyCheck } from '../src/commands/policy-check.js';
import { endpointPickerWarnings } from '../src/core/policies/framework/endpoint-picker-config.js';

/**
 * Every manifest under deploy/kubernetes/ (no cluster here): each object validated against its
 * OpenAPI model (kubernetes-models, @kubernetes-models/gateway-api), the CRDs without a models
 * package against their required fields, the llmlb configs in the ConfigMaps through llmlb's own
 * loader, and the references between the objects (selectors, ports, RBAC, pool, route).
 */

const DIR = new URL('../deploy/kubernetes/', import.meta.url).pathname;

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  [k: string]: unknown;
}

const files = readdirSync(DIR, { recursive: true })
  .map(String)
  .filter((f) => /\.ya?ml$/.test(f))
  .sort();

const objects: { file: string; obj: K8sObject }[] = files.flatMap((file) =>
  parseAllDocuments(readFileSync(join(DIR, file), 'utf8')).map((doc) => {
    assert.deepEqual(doc.errors, [], `${file}: YAML errors`);
    return { file, obj: doc.toJS() as K8sObject };
  }),
);

const name = z.string().min(1).max(253);
/** The CRDs' required fields (GIE v1.x, llm-d v1alpha2, Prometheus Operator v1). */
const crdSchemas: Record<string, z.ZodType> = {
  'inference.networking.k8s.io/v1/InferencePool': z.object({
    metadata: z.object({ name }),
    spec: z.object({
      selector: z.object({
        matchLabels: z.record(z.string(), z.string().max(63)).refine((m) => Object.keys(m).length >= 1),
      }),
      targetPorts: z
        .array(z.strictObject({ number: z.number().int().min(1).max(65535) }))
        .min(1)
        .max(8),
      endpointPickerRef: z
        .strictObject({
          group: z.string().optional(),
          kind: z.string().default('Service'),
          name,
          port: z.strictObject({ number: z.number().int().min(1).max(65535) }).optional(),
          failureMode: z.enum(['FailOpen', 'FailClose']).optional(),
        })
        .refine((r) => r.kind !== 'Service' || r.port !== undefined, 'port is required when kind is Service'),
      appProtocol: z.enum(['http', 'kubernetes.io/h2c']).optional(),
    }),
  }),
  'llm-d.ai/v1alpha2/InferenceObjective': z.object({
    metadata: z.object({ name }),
    spec: z.strictObject({
      priority: z.number().int().optional(),
      poolRef: z.strictObject({ group: z.string().optional(), kind: z.string().optional(), name }),
    }),
  }),
  'monitoring.coreos.com/v1/ServiceMonitor': z.object({
    metadata: z.object({ name }),
    spec: z.object({
      selector: z.object({ matchLabels: z.record(z.string(), z.string()) }),
      endpoints: z
        .array(
          z.object({
            port: z.string().min(1),
            path: z.string().startsWith('/').optional(),
            interval: z
              .string()
              .regex(/^\d+(ms|s|m|h)$/)
              .optional(),
          }),
        )
        .min(1),
    }),
  }),
};

type Model = new (data: never) => { validate(): void };
const models: Record<string, Model> = {
  'v1/ConfigMap': ConfigMap as unknown as Model,
  'v1/Service': Service as unknown as Model,
  'v1/ServiceAccount': ServiceAccount as unknown as Model,
  'apps/v1/Deployment': Deployment as unknown as Model,
  'rbac.authorization.k8s.io/v1/Role': Role as unknown as Model,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding as unknown as Model,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget as unknown as Model,
  'gateway.networking.k8s.io/v1/Gateway': Gateway as unknown as Model,
  'gateway.networking.k8s.io/v1/HTTPRoute': HTTPRoute as unknown as Model,
};

const of = <T>(kind: string): (K8sObject & T)[] =>
  objects.filter((o) => o.obj.kind === kind).map((o) => o.obj as K8sObject & T);
const one = <T>(kind: string, n: string): K8sObject & T => {
  const o = of<T>(kind).find((x) => x.metadata.name === n);
  assert.ok(o, `no ${kind} '${n}'`);
  return o;
};
const selects = (sel: Record<string, string>, labels: Record<string, string> | undefined): boolean =>
  Object.entries(sel).every(([k, v]) => labels?.[k] === v);

interface Container {
  name: string;
  args?: string[];
  ports?: { name?: string; containerPort: number }[];
  livenessProbe?: {
    httpGet?: { path: string; port: string | number };
    grpc?: { port: number; service?: string };
  };
  readinessProbe?: {
    httpGet?: { path: string; port: string | number };
    grpc?: { port: number; service?: string };
  };
}
interface DeploymentShape {
  spec: {
    selector: { matchLabels: Record<string, string> };
    template: {
      metadata: { labels: Record<string, string> };
      spec: {
        serviceAccountName?: string;
        containers: Container[];
        volumes?: { configMap?: { name: string } }[];
      };
    };
  };
}

test('the manifests are there: a router (with Redis) and a picker for an InferencePool', () => {
  assert.deepEqual(files, [
    'epp/inferencepool.yaml',
    'epp/llmlb-epp.yaml',
    'router/llmlb-router.yaml',
    'router/redis.yaml',
  ]);
  const kinds = new Set(objects.map((o) => o.obj.kind));
  for (const k of [
    'Deployment',
    'Service',
    'ConfigMap',
    'ServiceMonitor',
    'PodDisruptionBudget',
    'ServiceAccount',
    'Role',
    'RoleBinding',
    'InferencePool',
    'HTTPRoute',
    'Gateway',
  ])
    assert.ok(kinds.has(k), k);
});

test('every object validates against its model (or, for CRDs, its required fields)', () => {
  for (const { file, obj } of objects) {
    const key = `${obj.apiVersion}/${obj.kind}`;
    const Model = models[key];
    const crd = crdSchemas[key];
    assert.ok(Model ?? crd, `${file}: no model for ${key}`);
    if (Model)
      assert.doesNotThrow(() => new Model(obj as never).validate(), `${file}: ${key} ${obj.metadata.name}`);
    else {
      const r = crd!.safeParse(obj);
      assert.ok(r.success, `${file}: ${key} ${obj.metadata.name}: ${r.success ? '' : r.error.message}`);
    }
  }
  // The models do catch a bad object (the check above could not pass vacuously).
  const bad = structuredClone(one<DeploymentShape>('Deployment', 'llmlb-epp'));
  (bad.spec.template.spec.containers[0]!.ports![0] as { containerPort: unknown }).containerPort = 'grpc';
  assert.throws(() => new Deployment(bad as never).validate(), /containerPort/);
});

test("each ConfigMap's llmlb config loads with llmlb's own loader, and the picker's profile is llm-d's", () => {
  const cms = of<{ data: Record<string, string> }>('ConfigMap');
  assert.equal(cms.length, 2);
  for (const cm of cms) {
    const c = parseConfig(cm.data['config.yaml']!, {
      ...policyCheck,
      source: `${cm.metadata.name}/config.yaml`,
    });
    assert.equal(c.server.host, '0.0.0.0', 'reachable from outside the pod');
    assert.equal(c.discovery.kubernetes?.inferencePool, 'vllm-llama3-8b-instruct');
    if (cm.metadata.name === 'llmlb-epp') {
      assert.equal(c.scheduling?.apiVersion, 'llm-d.ai/v1alpha1');
      assert.deepEqual(endpointPickerWarnings(c.scheduling!), [], 'current plugin names only');
    } else {
      assert.ok(
        c.sharedView && c.state?.redis.startsWith('redis://llmlb-redis:'),
        'replicas share state through the Redis Service',
      );
      one('Service', 'llmlb-redis');
    }
  }
});

test('references hold: selectors, ports, probes, config mounts, RBAC, the pool, the route', () => {
  for (const d of of<DeploymentShape>('Deployment')) {
    const t = d.spec.template;
    assert.ok(
      selects(d.spec.selector.matchLabels, t.metadata.labels),
      `${d.metadata.name}: selector vs template`,
    );
    for (const v of t.spec.volumes ?? []) if (v.configMap) one('ConfigMap', v.configMap.name);
    if (t.spec.serviceAccountName) one('ServiceAccount', t.spec.serviceAccountName);
  }
  // Services select a Deployment's pods, on ports its containers name.
  for (const s of of<{
    spec: { selector: Record<string, string>; ports: { targetPort: string | number }[] };
  }>('Service')) {
    const d = of<DeploymentShape>('Deployment').find((x) =>
      selects(s.spec.selector, x.spec.template.metadata.labels),
    );
    assert.ok(d, `Service ${s.metadata.name} selects no Deployment`);
    const named = d.spec.template.spec.containers.flatMap((c) => (c.ports ?? []).map((p) => p.name));
    for (const p of s.spec.ports)
      if (typeof p.targetPort === 'string')
        assert.ok(named.includes(p.targetPort), `${s.metadata.name}: ${p.targetPort}`);
  }
  // ServiceMonitors: the Service they select has the port they scrape.
  for (const m of of<{
    spec: { selector: { matchLabels: Record<string, string> }; endpoints: { port: string }[] };
  }>('ServiceMonitor')) {
    const s = of<{ spec: { ports: { name: string }[] } }>('Service').find((x) =>
      selects(m.spec.selector.matchLabels, x.metadata.labels),
    );
    assert.ok(s, `ServiceMonitor ${m.metadata.name} selects no Service`);
    for (const e of m.spec.endpoints)
      assert.ok(
        s.spec.ports.some((p) => p.name === e.port),
        e.port,
      );
  }
  // PDBs cover a Deployment with more than one replica.
  for (const p of of<{ spec: { selector: { matchLabels: Record<string, string> } } }>(
    'PodDisruptionBudget',
  )) {
    const d = of<DeploymentShape & { spec: { replicas: number } }>('Deployment').find((x) =>
      selects(p.spec.selector.matchLabels, x.spec.template.metadata.labels),
    );
    assert.ok(d && d.spec.replicas > 1, `PDB ${p.metadata.name}`);
  }
  // Probes: the router on /healthz and /readyz; the picker on grpc.health.v1 (liveness, readiness) at 9003.
  const router = one<DeploymentShape>('Deployment', 'llmlb-router').spec.template.spec.containers[0]!;
  assert.deepEqual(router.args, ['serve', '--config', '/etc/llmlb/config.yaml']);
  assert.equal(router.livenessProbe?.httpGet?.path, '/healthz');
  assert.equal(router.readinessProbe?.httpGet?.path, '/readyz');
  const epp = one<DeploymentShape>('Deployment', 'llmlb-epp').spec.template.spec.containers[0]!;
  assert.deepEqual(epp.args, ['epp', '--config', '/etc/llmlb/config.yaml']);
  assert.deepEqual(epp.livenessProbe?.grpc, { port: 9003, service: 'liveness' });
  assert.deepEqual(epp.readinessProbe?.grpc, { port: 9003, service: 'readiness' });
  assert.deepEqual(
    epp.ports?.map((p) => p.containerPort),
    [9002, 9003, 9090],
  );
  // RBAC: each binding names a Role and ServiceAccount that exist, granting what discovery reads.
  for (const b of of<{ subjects: { name: string }[]; roleRef: { kind: string; name: string } }>(
    'RoleBinding',
  )) {
    const role = one<{ rules: { apiGroups: string[]; resources: string[]; verbs: string[] }[] }>(
      'Role',
      b.roleRef.name,
    );
    for (const s of b.subjects) one('ServiceAccount', s.name);
    const grants = (group: string, resource: string): boolean =>
      role.rules.some(
        (r) =>
          r.apiGroups.includes(group) &&
          r.resources.includes(resource) &&
          ['get', 'list', 'watch'].every((v) => r.verbs.includes(v)),
      );
    assert.ok(grants('', 'pods') && grants('inference.networking.k8s.io', 'inferencepools'), b.metadata.name);
    assert.ok(grants('llm-d.ai', 'inferenceobjectives'), `${b.metadata.name}: InferenceObjective priorities`);
    assert.ok(
      role.rules.every((r) => r.verbs.every((v) => ['get', 'list', 'watch'].includes(v))),
      'read-only',
    );
  }
  // The pool points at the picker's ext_proc port; the route at the pool, under the Gateway.
  const pool = one<{ spec: { endpointPickerRef: { name: string; port: { number: number } } } }>(
    'InferencePool',
    'vllm-llama3-8b-instruct',
  );
  const eppSvc = one<{ spec: { ports: { port: number; appProtocol?: string }[] } }>(
    'Service',
    pool.spec.endpointPickerRef.name,
  );
  const grpcPort = eppSvc.spec.ports.find((p) => p.port === pool.spec.endpointPickerRef.port.number);
  assert.equal(grpcPort?.appProtocol, 'http2');
  const route = one<{
    spec: {
      parentRefs: { name: string }[];
      rules: { backendRefs: { group: string; kind: string; name: string }[] }[];
    };
  }>('HTTPRoute', 'vllm-llama3-8b-instruct');
  one('Gateway', route.spec.parentRefs[0]!.name);
  assert.deepEqual(route.spec.rules[0]!.backendRefs[0], {
    group: 'inference.networking.k8s.io',
    kind: 'InferencePool',
    name: pool.metadata.name,
  });
  const objective = one<{ spec: { poolRef: { name: string } } }>('InferenceObjective', 'critical');
  assert.equal(objective.spec.poolRef.name, pool.metadata.name);
});
