// A store outage, counted; and when DynamoDB throttled a leaseq item, which one: its kind as a metric
// dimension (a fixed vocabulary), its key's hash in the log (never the key: a tenant's data, and a
// dimension per key would be a CloudWatch metric per key).
import { StoreUnavailableError } from '../../errors.ts';
import { MetricName } from './metric-names.ts';
import type { MetricsSink } from './metrics.ts';

interface WarnLog {
  warn(message: string, extra?: Record<string, unknown>): void;
}

/** Counts StoreUnavailable for `error`; a throttle also counts StoreThrottled and logs the item. */
export function noteStoreUnavailable(metrics: MetricsSink, log: WarnLog, error: unknown): void {
  metrics.count(MetricName.StoreUnavailable);
  const throttle = error instanceof StoreUnavailableError ? error.throttle : undefined;
  if (throttle === undefined) return;
  metrics.count(MetricName.StoreThrottled, 1, { itemKind: throttle.itemKind });
  log.warn('DynamoDB throttled a leaseq item: its partition is over its throughput (hot key)', {
    itemKind: throttle.itemKind,
    ...(throttle.keyHash ? { keyHash: throttle.keyHash } : {}),
    operation: (error as StoreUnavailableError).operation,
    ...(throttle.reason ? { throttlingReason: throttle.reason } : {}),
  });
}
