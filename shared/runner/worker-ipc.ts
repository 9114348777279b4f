// The contract between the worker pool (parent) and its worker processes (children): the environment
// names the parent sets and the messages a child sends back over IPC. Both sides import it; neither
// imports the other, so a child never loads the pool module.
import type { Summary } from '../core/observe/metrics.ts';

/** How the pool tells a worker process its invocation timeout. */
export const INVOCATION_TIMEOUT_ENV = 'LEASEQ_INVOCATION_TIMEOUT_MS';

/** Messages a worker process sends to its parent. */
export type WorkerMessage =
  | { readonly type: 'ready'; readonly worker: string }
  | {
      readonly type: 'metrics';
      readonly worker: string;
      readonly counters: Record<string, number>;
      readonly observations?: Record<string, Summary>;
    }
  | { readonly type: 'error'; readonly worker: string; readonly message: string };
