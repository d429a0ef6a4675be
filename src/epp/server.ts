/**
 * The endpoint picker's gRPC side: Envoy's ext_proc v3 `ExternalProcessor.Process` (one EppStream
 * per HTTP request) on `epp.port`, and grpc.health.v1 on both `epp.port` and `epp.healthPort`.
 * The router core it drives is `serve`'s own (src/proxy/router.ts), lent as a FlightHost.
 */
import {
  Server,
  ServerCredentials,
  status as GrpcStatus,
  type ServerDuplexStream,
  type ServerUnaryCall,
  type ServerWritableStream,
  type sendUnaryData,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import { Gauge } from 'prom-client';
import type { FlightHost } from '../proxy/flight.js';
import { Endpoints } from './endpoints.js';
import {
  eppProtos,
  NOT_SERVING,
  SERVING,
  type HealthCheckRequest,
  type HealthCheckResponse,
  type ProcessingRequest,
  type ProcessingResponse,
} from './protos.js';
import { EppStream, type EppContext } from './stream.js';

/** Health service names: liveness ('' or 'liveness') is the process; readiness a ready backend. */
export const EXT_PROC_SERVICE = 'envoy.service.ext_proc.v3.ExternalProcessor';
const LIVENESS = new Set(['', 'liveness']);
const READINESS = new Set([EXT_PROC_SERVICE, 'readiness']);
/** How often a health Watch looks for a change. */
const WATCH_INTERVAL_MS = 1000;

export interface EppOptions {
  readonly host: string;
  readonly port: number;
  readonly healthPort: number;
  readonly fallbacks: number;
  /** Told each pick's added latency in ms (bench/epp.ts). */
  readonly onDecision?: ((ms: number, held: boolean) => void) | undefined;
}

export class EppServer {
  private readonly main = new Server();
  private readonly health = new Server();
  readonly ctx: EppContext;
  private readonly watches = new Set<NodeJS.Timeout>();
  /** Set once listening (port 0 resolves to the OS's choice). */
  port = 0;
  healthPort = 0;

  constructor(
    private readonly host: FlightHost,
    private readonly opts: EppOptions,
  ) {
    this.ctx = {
      host,
      endpoints: new Endpoints(host.fleet),
      fallbacks: opts.fallbacks,
      open: 0,
      onDecision: opts.onDecision,
    };
    const ctx = this.ctx;
    new Gauge({
      name: 'llmlb_epp_streams',
      help: 'ext_proc streams open now (one per request the gateway is asking or streaming back)',
      registers: [host.metrics.registry],
      collect() {
        this.set(ctx.open);
      },
    });
    const p = eppProtos();
    const processor: UntypedServiceImplementation = {
      Process: (call: ServerDuplexStream<ProcessingRequest, ProcessingResponse>) => {
        new EppStream(this.ctx, call);
      },
    };
    this.main.addService(p.ExternalProcessor.service, processor);
    const healthImpl: UntypedServiceImplementation = {
      Check: (
        call: ServerUnaryCall<HealthCheckRequest, HealthCheckResponse>,
        cb: sendUnaryData<HealthCheckResponse>,
      ) => {
        const s = this.statusOf(call.request.service ?? '');
        if (s === undefined) cb({ code: GrpcStatus.NOT_FOUND, details: 'unknown service' });
        else cb(null, { status: s });
      },
      Watch: (call: ServerWritableStream<HealthCheckRequest, HealthCheckResponse>) => {
        const service = call.request.service ?? '';
        let last = this.statusOf(service);
        if (last === undefined) {
          call.emit('error', { code: GrpcStatus.NOT_FOUND, details: 'unknown service' });
          return;
        }
        call.write({ status: last });
        const timer = setInterval(() => {
          const s = this.statusOf(service);
          if (s !== last) {
            last = s;
            call.write({ status: s });
          }
        }, WATCH_INTERVAL_MS);
        this.watches.add(timer);
        const stop = (): void => {
          clearInterval(timer);
          this.watches.delete(timer);
        };
        call.on('cancelled', stop);
        call.on('close', stop);
      },
    };
    this.main.addService(p.Health.service, healthImpl);
    this.health.addService(p.Health.service, healthImpl);
  }

  /** SERVING / NOT_SERVING for a known service name; undefined for an unknown one. */
  statusOf(service: string): number | undefined {
    if (LIVENESS.has(service)) return SERVING;
    if (!READINESS.has(service)) return undefined;
    for (const b of this.host.scheduler.backendViews()) if (b.healthy && !b.draining) return SERVING;
    return NOT_SERVING;
  }

  async listen(): Promise<void> {
    this.port = await bind(this.main, this.opts.host, this.opts.port);
    this.healthPort = await bind(this.health, this.opts.host, this.opts.healthPort);
  }

  /** Stops taking streams; open ones are cancelled (each gives back what it holds). */
  async close(): Promise<void> {
    for (const t of this.watches) clearInterval(t);
    this.watches.clear();
    for (const s of [this.main, this.health]) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(() => {
          s.forceShutdown();
          resolve();
        }, 2000);
        s.tryShutdown(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }
}

function bind(server: Server, host: string, port: number): Promise<number> {
  const h = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return new Promise((resolve, reject) =>
    server.bindAsync(`${h}:${port}`, ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
}
