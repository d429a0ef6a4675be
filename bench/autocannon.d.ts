/** The part of autocannon's programmatic API the proxy benchmark uses (the package ships no types). */
declare module 'autocannon' {
  namespace autocannon {
    interface Options {
      url: string | string[];
      connections?: number;
      /** Seconds. */
      duration?: number;
      amount?: number;
      method?: string;
      body?: string | Buffer;
      headers?: Record<string, string>;
      /** Seconds before a request counts as a timeout. */
      timeout?: number;
      pipelining?: number;
      bailout?: number;
      title?: string;
    }
    interface Stats {
      average: number;
      mean: number;
      stddev: number;
      min: number;
      max: number;
      total: number;
      p50: number;
      p90: number;
      p99: number;
    }
    interface Result {
      /** Seconds. */
      duration: number;
      errors: number;
      timeouts: number;
      non2xx: number;
      resets: number;
      '2xx': number;
      /** Milliseconds, recorded at 1 ms resolution. */
      latency: Stats;
      /** Per-second samples; `total` is every completed request. */
      requests: Stats & { sent: number };
      throughput: Stats;
    }
    interface Instance extends PromiseLike<Result> {
      stop(): void;
    }
  }
  function autocannon(opts: autocannon.Options): autocannon.Instance;
  export = autocannon;
}
