/**
 * What workload generators produce: requests a client sends, shared by `llmlb simulate` (virtual
 * time) and `llmlb bench` (over HTTP). Times are seconds from the start of the run.
 */
import type { WorkloadApi } from '../api/endpoints.js';

export interface ChatMessage {
  readonly role: 'system' | 'user' | 'assistant';
  readonly content: string;
}

export interface WorkloadRequest {
  readonly id: string;
  readonly model: string;
  /** Which API the client uses. */
  readonly api: WorkloadApi;
  /** For generate/completions. */
  readonly prompt?: string;
  /** For chat. */
  readonly messages?: readonly ChatMessage[];
  /**
   * Output length the engine will produce: reaches the engine as the `x-llmlb-output-tokens`
   * header (or the simulator's engine model directly). Policies never see it (design §3).
   */
  readonly outputTokens: number;
  readonly maxTokens?: number;
  /** Affinity key sent as the `x-session-token` header and OpenAI `user`. */
  readonly sessionKey?: string;
  /** Free-form class label for reports (e.g. the the performance-aware router task type or LL/LH/HL/HH). */
  readonly label?: string;
  /** Task type of task-mix workloads (the performance-aware router: sentiment, entity-recognition, …). */
  readonly task?: string;
  /**
   * Task hint the client sends (the router's `server.taskHintHeader`, x-llmlb-task by default; the
   * simulator hands it to the router directly): the output-length predictor's task feature.
   */
  readonly taskHint?: string;
  /** The performance-aware router size class: light/heavy prompt × light/heavy decode. */
  readonly sizeClass?: 'LL' | 'LH' | 'HL' | 'HH';
  /** Client-side timeout, seconds (e.g. workload.py's --timeout); absent = the runner's default. */
  readonly timeoutS?: number;
  /**
   * Exact prompt length when the text is a short stand-in (trace requests known only by their
   * lengths and block ids: src/workloads/trace-blocks.ts); absent = count the text's tokens.
   */
  readonly promptTokens?: number;
  /** The prompt's shared blocks when the text is a stand-in (engine prefix cache, see above). */
  readonly prefixBlocks?: PrefixBlocks;
  /** Chain state for the stand-in's blocks that no trace block covers (unique to the request). */
  readonly tailState?: number;
}

/** A prompt as a chain of fixed-size blocks: chain[i] identifies the first i+1 blocks. */
export interface PrefixBlocks {
  readonly blockTokens: number;
  readonly chain: readonly number[];
}

export interface ScheduledRequest {
  /** Send time, seconds from run start. */
  readonly at: number;
  readonly request: WorkloadRequest;
}

/**
 * A client program. Open-loop generators return everything from `start`; closed-loop ones
 * (think time, multi-turn sessions, trees) return follow-ups when a request finishes.
 */
export interface ClientDriver {
  start(): ScheduledRequest[];
  /** `now` in seconds; `outputText` is what the engine answered (for sessions that resend history). */
  onFinish(id: string, now: number, ok: boolean, outputText: string): ScheduledRequest[];
  /**
   * The opening requests one at a time, in send order (what start() returns, without holding them
   * all: trace replay streams its file). The simulator prefers it when present.
   */
  stream?(): Iterator<ScheduledRequest>;
  /**
   * true: start() returns the same requests every time (in a new array) and onFinish sends nothing
   * and keeps no state, so one driver may serve any number of runs (open-loop generators).
   */
  readonly reusable?: boolean;
}
