import {
  ListWatch,
  Watch,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
} from '@kubernetes/client-node';

/**
 * One informer (list, then watch from its resourceVersion) that restarts itself: the client's
 * ListWatch re-watches when a watch ends and relists on 410 Gone, but stops on any other error —
 * here it starts again after a backoff. `synced` turns true once a list has come back, so an
 * informer that has not listed yet is never read as "no objects".
 */
export class Informer<T extends KubernetesObject> {
  readonly lw: ListWatch<T>;
  synced = false;
  private failures = 0;
  private retry: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    kc: KubeConfig,
    path: string,
    list: () => Promise<KubernetesListObject<T>>,
    selectors: { label?: string; field?: string },
    private readonly onChange: () => void,
    private readonly onError: (err: unknown, retryMs: number) => void,
    private readonly backoff: { base: number; max: number },
  ) {
    const listed = async (): Promise<KubernetesListObject<T>> => {
      const out = await list();
      // Read once ListWatch has applied the list (right after this promise settles, synchronously).
      setImmediate(() => {
        this.synced = true;
        this.failures = 0;
        this.onChange();
      });
      return out;
    };
    this.lw = new ListWatch<T>(path, new Watch(kc), listed, false, selectors.label, selectors.field);
    this.lw.on('change', () => {
      this.failures = 0;
      this.onChange();
    });
    this.lw.on('error', (err?: unknown) => this.failed(err));
  }

  /** A list or watch failed (or the start itself threw): start again after the backoff. */
  private failed(err: unknown): void {
    if (this.stopped) return;
    const ms = Math.min(this.backoff.max, this.backoff.base * 2 ** this.failures++);
    this.onError(err, ms);
    if (this.retry) clearTimeout(this.retry);
    this.retry = setTimeout(() => {
      this.retry = undefined;
      this.start();
    }, ms);
  }

  start(): void {
    if (!this.stopped) this.lw.start().catch((err: unknown) => this.failed(err));
  }

  stop(): void {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    this.lw.stop().catch(() => undefined); // aborting the watch request cannot fail in a way worth telling
  }
}
