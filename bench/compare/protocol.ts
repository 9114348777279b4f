/**
 * What the benchmark's parent (fleet.ts) and its worker processes (worker.ts) tell each other: the spec
 * a worker starts from (an environment variable) and the reports it sends back over IPC.
 */
import type { CapacityTotals } from './capacity.ts';
import type { ConsumerNames } from './consumers.ts';
import type { LatencyTally, LatencyVariant } from './latency-model.ts';
import type { EffectSample } from './probe.ts';
import type { ConsumerId, JobShape, LimitVariantId } from './scenarios.ts';

/** Environment variable carrying the worker process's id. */
export const WORKER_ID_ENV = 'BENCH_WORKER_ID';

/**
 * One run as a worker process serves it. Worker processes outlive runs (starting one costs seconds);
 * each run builds fresh clients, counters and consumer, and drops them at its end.
 */
export interface RunAssignment {
  /** The run's id: reports carry it, so a late report of an earlier run is never counted. */
  readonly run: string;
  readonly consumer: ConsumerId;
  readonly endpoint: string;
  readonly region: string;
  readonly names: ConsumerNames;
  readonly queueArn: string;
  /** The invocation timeout of every batch (its context's deadline). */
  readonly timeoutMs: number;
  /** Visibility every receive asks for. */
  readonly visibilitySeconds: number;
  readonly killKeys: readonly string[];
  readonly markerDir: string;
  /** AWS latency added to every call of the worker's clients; none when absent. */
  readonly latency?: LatencyVariant;
  readonly shape: JobShape;
  /** The limits scenario's variant: the leaseq consumers run its job set (jobs.ts limitJobs). */
  readonly limits?: LimitVariantId;
}

/** What the parent tells a worker process. */
export type WorkerCommand =
  | { readonly type: 'run'; readonly assignment: RunAssignment }
  /** Stop polling after the batch in flight, report `done`, wait for the next run. */
  | { readonly type: 'stop'; readonly run: string };

/** A worker's cumulative counters, sent with every report. */
export interface WorkerState {
  /** Requests by `Service.Command`, from the SDK middleware on this worker's clients. */
  readonly requests: Record<string, number>;
  readonly capacity: CapacityTotals;
  /** What the consumer decided (its own counters). */
  readonly stats: Record<string, number>;
  readonly batches: number;
  readonly received: number;
  /** Records reported as batch item failures (left in the queue). */
  readonly failed: number;
  /** Batches whose handler threw (all their records left in the queue). */
  readonly batchErrors: number;
  /** Receives that failed (the loop backed off). */
  readonly pollErrors: number;
  readonly deleteFailed: number;
  /** Time inside the batch handler (what Lambda bills), summed over batches, ms. */
  readonly handlerMs: number;
  /** The same, each batch rounded up to the millisecond as Lambda bills it. */
  readonly billedMs: number;
  /** Under a latency model: the emulator's time against the draws. */
  readonly latency?: LatencyTally;
}

/** Messages a worker sends to its parent. */
export type WorkerReport =
  /** Loaded and waiting for a run. */
  | { readonly type: 'ready'; readonly id: string }
  /** Polling for this run. */
  | { readonly type: 'started'; readonly id: string; readonly run: string }
  | {
      readonly type: 'batch' | 'done';
      readonly id: string;
      readonly run: string;
      /** Message ids deleted after this batch. */
      readonly finished: readonly string[];
      /** The job key of each finished message (same order; undefined when its body had none). */
      readonly finishedKeys?: readonly (string | undefined)[];
      readonly effects: readonly EffectSample[];
      readonly state: WorkerState;
    };
