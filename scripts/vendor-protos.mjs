// Re-copies into proto/ the .proto files the ext_proc v3 endpoint picker (src/epp) loads: Envoy's
// envoy/service/ext_proc/v3 and everything it imports, transitively, from the copies that
// @grpc/grpc-js-xds ships (Envoy API, xds/udpa, protoc-gen-validate, googleapis) and protobuf.js
// (google/protobuf/descriptor.proto). google/protobuf's other well-known types (duration, struct,
// any, …) are built into protobuf.js, which proto-loader uses: they need no file.
// grpc/health/v1/health.proto is not shipped by any dependency: it lives in proto/ as written from
// the official definition (grpc/grpc-proto) and is left alone here.
// Usage: node scripts/vendor-protos.mjs   (then review `git diff proto/`)
import { cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

const deps = 'node_modules/@grpc/grpc-js-xds/deps';
const roots = {
  'envoy-api': join(deps, 'envoy-api'),
  xds: join(deps, 'xds'),
  'protoc-gen-validate': join(deps, 'protoc-gen-validate'),
  googleapis: join(deps, 'googleapis'),
  protobufjs: 'node_modules/protobufjs',
};
const ENTRY = 'envoy/service/ext_proc/v3/external_processor.proto';
/** Built into protobuf.js (proto-loader resolves them without a file). */
const BUILTIN = new Set([
  'google/protobuf/any.proto',
  'google/protobuf/duration.proto',
  'google/protobuf/empty.proto',
  'google/protobuf/struct.proto',
  'google/protobuf/timestamp.proto',
  'google/protobuf/wrappers.proto',
  'google/protobuf/field_mask.proto',
]);

const found = new Map(); // proto path -> origin name
const todo = [ENTRY];
while (todo.length > 0) {
  const p = todo.pop();
  if (found.has(p) || BUILTIN.has(p)) continue;
  const origin = Object.keys(roots).find((r) => existsSync(join(roots[r], p)));
  if (origin === undefined)
    throw new Error(`vendor-protos: ${p} is in none of ${Object.values(roots).join(', ')}`);
  found.set(p, origin);
  const text = readFileSync(join(roots[origin], p), 'utf8');
  for (const m of text.matchAll(/^\s*import\s+(?:public\s+|weak\s+)?"([^"]+)";/gm)) todo.push(m[1]);
}
/**
 * The copy @grpc/grpc-js-xds 1.14.1 ships predates Envoy's FULL_DUPLEX_STREAMED body mode (Envoy
 * 1.32's API). Its two additions are written in from the official definition, with upstream's
 * field numbers and values, so the wire format is Envoy's: BodyMutation.streamed_response (3) with
 * StreamedBodyResponse { body = 1; end_of_stream = 2 }, and BodySendMode FULL_DUPLEX_STREAMED = 4.
 * A newer copy that has them already is left as it is.
 */
const PATCHES = [
  {
    file: 'envoy/service/ext_proc/v3/external_processor.proto',
    has: 'StreamedBodyResponse',
    anchor: '    // Clear the corresponding body chunk\n    bool clear_body = 2;\n',
    add: `
    // [llmlb vendor patch, Envoy 1.32 API] A chunk of the body in FULL_DUPLEX_STREAMED mode.
    StreamedBodyResponse streamed_response = 3;
`,
    tail: `
// [llmlb vendor patch, Envoy 1.32 API] One body chunk sent back in FULL_DUPLEX_STREAMED mode.
message StreamedBodyResponse {
  // The body chunk that will be passed to the upstream/downstream by Envoy.
  bytes body = 1;

  // The server sets this flag to true if it has received a body request with
  // end_of_stream set to true, and this is the last chunk of body responses.
  bool end_of_stream = 2;
}
`,
  },
  {
    file: 'envoy/extensions/filters/http/ext_proc/v3/processing_mode.proto',
    has: 'FULL_DUPLEX_STREAMED',
    anchor: '    BUFFERED_PARTIAL = 3;\n',
    add: `
    // [llmlb vendor patch, Envoy 1.32 API] Body chunks streamed both ways at once; the server
    // sends back StreamedBodyResponse chunks.
    FULL_DUPLEX_STREAMED = 4;
`,
  },
];
for (const patch of PATCHES) {
  let text = readFileSync(join(roots[found.get(patch.file)], patch.file), 'utf8').replace(/\r\n/g, '\n');
  if (!text.includes(patch.has)) {
    if (!text.includes(patch.anchor)) throw new Error(`vendor-protos: cannot patch ${patch.file}`);
    text = text.replace(patch.anchor, patch.anchor + patch.add) + (patch.tail ?? '');
  }
  patch.text = text;
}

const byOrigin = new Map();
for (const [p, origin] of [...found].sort()) {
  mkdirSync(dirname(join('proto', p)), { recursive: true });
  const patched = PATCHES.find((x) => x.file === p);
  if (patched) writeFileSync(join('proto', p), patched.text);
  else cpSync(join(roots[origin], p), join('proto', p));
  byOrigin.set(origin, [...(byOrigin.get(origin) ?? []), p]);
}
const SOURCES = {
  'envoy-api': 'github.com/envoyproxy/envoy (api/), Apache-2.0: LICENSE-APACHE-2.0',
  xds: 'github.com/cncf/xds, Apache-2.0: LICENSE-APACHE-2.0',
  'protoc-gen-validate': 'github.com/bufbuild/protoc-gen-validate, Apache-2.0: LICENSE-APACHE-2.0',
  googleapis: 'github.com/googleapis/googleapis, Apache-2.0: LICENSE-APACHE-2.0',
  protobufjs: 'github.com/protocolbuffers/protobuf via protobuf.js, BSD-3-Clause: LICENSE-PROTOBUF',
};
const lines = [
  '# Vendored protocol definitions',
  '',
  'Copied by `node scripts/vendor-protos.mjs` (do not edit by hand). Loaded once at start by',
  '`src/epp/protos.ts` with `@grpc/proto-loader`.',
  '',
];
for (const [origin, files] of byOrigin) {
  lines.push(
    `## ${SOURCES[origin]}`,
    '',
    ...files.map((f) =>
      PATCHES.some((x) => x.file === f)
        ? `- \`${f}\` (patched: see "[llmlb vendor patch" in it and scripts/vendor-protos.mjs)`
        : `- \`${f}\``,
    ),
    '',
  );
}
lines.push(
  '## github.com/grpc/grpc-proto, Apache-2.0: LICENSE-APACHE-2.0',
  '',
  '- `grpc/health/v1/health.proto` (written from the official definition)',
  '',
);
writeFileSync('proto/SOURCES.md', lines.join('\n'));
// The full Apache-2.0 text (the upstream repositories' LICENSE; @grpc/grpc-js ships it verbatim).
cpSync('node_modules/@grpc/grpc-js/LICENSE', 'proto/LICENSE-APACHE-2.0');
console.log(`vendor-protos: ${found.size} files into proto/`);
