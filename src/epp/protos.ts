/**
 * The Envoy ext_proc v3 and grpc.health.v1 definitions, loaded once from the vendored protos
 * (proto/, re-copied by scripts/vendor-protos.mjs) — at the first call, never per request — and the
 * TypeScript shapes of the messages the picker reads and writes (proto-loader's plain objects:
 * field names as in the .proto, bytes as Buffer, oneofs named in a virtual field).
 */
import { fileURLToPath } from 'node:url';
import { loadPackageDefinition, type GrpcObject, type ServiceClientConstructor } from '@grpc/grpc-js';
import { loadSync, type Options } from '@grpc/proto-loader';

/** proto/ at the package root: two levels up from both src/epp/ and dist/epp/. */
export const PROTO_DIR = fileURLToPath(new URL('../../proto/', import.meta.url));

const LOADER_OPTIONS: Options = {
  keepCase: true,
  longs: String,
  enums: Number,
  defaults: false,
  oneofs: true,
  includeDirs: [PROTO_DIR],
};

export interface EppProtos {
  readonly ExternalProcessor: ServiceClientConstructor;
  readonly Health: ServiceClientConstructor;
}

let loaded: EppProtos | undefined;

/** The two services (their `.service` definitions serve; the constructors are clients, for tests). */
export function eppProtos(): EppProtos {
  if (loaded) return loaded;
  const def = loadSync(
    ['envoy/service/ext_proc/v3/external_processor.proto', 'grpc/health/v1/health.proto'],
    LOADER_OPTIONS,
  );
  const root = loadPackageDefinition(def);
  const at = (path: string): ServiceClientConstructor => {
    let o: unknown = root;
    for (const k of path.split('.')) o = (o as GrpcObject)[k];
    if (typeof o !== 'function') throw new Error(`protos: ${path} not found in ${PROTO_DIR}`);
    return o as ServiceClientConstructor;
  };
  loaded = {
    ExternalProcessor: at('envoy.service.ext_proc.v3.ExternalProcessor'),
    Health: at('grpc.health.v1.Health'),
  };
  return loaded;
}

// ---- config.core.v3 / google.protobuf shapes ----

export interface HeaderValue {
  key: string;
  value?: string;
  /** Envoy sends values here (bytes) since 1.27; `value` before. */
  raw_value?: Buffer;
}
export interface HeaderMap {
  headers?: HeaderValue[];
}
export interface HeaderValueOption {
  header: HeaderValue;
  /** 2: OVERWRITE_IF_EXISTS_OR_ADD. */
  append_action?: number;
}
export interface HeaderMutation {
  set_headers?: HeaderValueOption[];
  remove_headers?: string[];
}

/**
 * google.protobuf.Value (one of its kinds). Its names are camelCase whatever `keepCase` says:
 * protobuf.js builds the well-known types in, from its own camelCase descriptors.
 */
export interface PbValue {
  nullValue?: number;
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
  structValue?: PbStruct;
  listValue?: { values?: PbValue[] };
  kind?: string;
}
export interface PbStruct {
  fields?: Record<string, PbValue>;
}

// ---- envoy.service.ext_proc.v3 ----

export interface HttpHeaders {
  headers?: HeaderMap;
  end_of_stream?: boolean;
}
export interface HttpBody {
  body?: Buffer;
  end_of_stream?: boolean;
}
export interface HttpTrailers {
  trailers?: HeaderMap;
}

export type RequestKind =
  | 'request_headers'
  | 'request_body'
  | 'request_trailers'
  | 'response_headers'
  | 'response_body'
  | 'response_trailers';

export interface ProcessingRequest {
  request_headers?: HttpHeaders;
  request_body?: HttpBody;
  request_trailers?: HttpTrailers;
  response_headers?: HttpHeaders;
  response_body?: HttpBody;
  response_trailers?: HttpTrailers;
  /** Which of the above this message carries (proto-loader's `oneofs`). */
  request?: RequestKind;
  metadata_context?: { filter_metadata?: Record<string, PbStruct> };
  observability_mode?: boolean;
}

export interface CommonResponse {
  /** 0: CONTINUE. */
  status?: number;
  header_mutation?: HeaderMutation;
  body_mutation?: {
    body?: Buffer;
    clear_body?: boolean;
    streamed_response?: { body: Buffer; end_of_stream: boolean };
  };
  clear_route_cache?: boolean;
}

export interface ImmediateResponse {
  status: { code: number };
  headers?: HeaderMutation;
  body?: Buffer;
  details?: string;
}

export interface ProcessingResponse {
  request_headers?: { response?: CommonResponse };
  request_body?: { response?: CommonResponse };
  request_trailers?: { header_mutation?: HeaderMutation };
  response_headers?: { response?: CommonResponse };
  response_body?: { response?: CommonResponse };
  response_trailers?: { header_mutation?: HeaderMutation };
  immediate_response?: ImmediateResponse;
  dynamic_metadata?: PbStruct;
  /** Which of the responses above it carries (set by readers; writers may leave it out). */
  response?: string;
}

// ---- grpc.health.v1 ----

export const SERVING = 1;
export const NOT_SERVING = 2;
export const SERVICE_UNKNOWN = 3;

export interface HealthCheckRequest {
  service?: string;
}
export interface HealthCheckResponse {
  status?: number;
}
