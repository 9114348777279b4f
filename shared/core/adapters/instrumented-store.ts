import { StoreUnavailableError } from '../../errors.ts';
import type { JobStore } from '../contract/job-store.ts';
import { MetricName } from '../observe/metric-names.ts';
import type { MetricsSink } from '../observe/metrics.ts';

/** The call kinds a {@link JobStore} has; the `operation` dimension of the store metrics. */
const OPERATIONS = [
  'claim',
  'claimAndComplete',
  'renew',
  'checkpoint',
  'complete',
  'release',
  'markDead',
  'get',
  'resetForRedrive',
  'undoRedrive',
  'recordLeaseLost',
  'recordDroppedCopy',
  'cancel',
] as const;

/**
 * Wraps a job store so every call reports its latency (`StoreLatency`, dimension `operation`) and every
 * call abandoned at its bound counts as `StoreTimeout`: the store-latency smell (p50/p99 per call kind,
 * and the share that hit the lease-derived timeouts).
 */
export function instrumentJobStore(
  store: JobStore,
  metrics: MetricsSink,
  now: () => number = Date.now,
): JobStore {
  const wrapped: Record<string, unknown> = {};
  for (const operation of OPERATIONS) {
    // The history's best-effort writes are optional in the port.
    const method = store[operation];
    if (method === undefined) continue;
    const call = method.bind(store) as (...args: unknown[]) => Promise<unknown>;
    // Built once per operation, not per call.
    const dimensions = Object.freeze({ operation });
    wrapped[operation] = async (...args: unknown[]) => {
      const started = now();
      try {
        return await call(...args);
      } catch (error) {
        if (isTimeout(error)) metrics.count(MetricName.StoreTimeout, 1, dimensions);
        throw error;
      } finally {
        metrics.observe(MetricName.StoreLatency, now() - started, dimensions);
      }
    };
  }
  return wrapped as unknown as JobStore;
}

function isTimeout(error: unknown): boolean {
  if (!(error instanceof StoreUnavailableError)) return false;
  const cause = error.cause;
  return cause instanceof Error && (cause.name === 'TimeoutError' || cause.name === 'AbortError');
}
