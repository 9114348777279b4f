// The history's best-effort writes (docs/protocol.md, "History"): a lost lease and a dropped copy of a
// dead job are recorded with a request of their own, which may fail without changing the record's
// outcome: a failure is logged at debug and swallowed.
import { errorClass } from '../../error-text.ts';
import type { MismatchEvent } from '../contract/job-history.ts';
import type { JobItem } from '../contract/job-item.ts';
import type { JobLease, JobStore } from '../contract/job-store.ts';
import { boundedSignal } from '../leases/timeout-signal.ts';
import type { JobLog } from '../observe/job-log.ts';

/** How long a best-effort history write may take: it must never hold a record up for long. */
const BEST_EFFORT_MS = 5000;

async function bestEffort(
  what: string,
  log: JobLog,
  write: (signal: AbortSignal) => Promise<void> | undefined,
) {
  const bound = boundedSignal(BEST_EFFORT_MS, what);
  try {
    await write(bound.signal);
  } catch (error) {
    log.debug(`could not record ${what} in the job history`, { error: errorClass(error) });
  } finally {
    bound.clear();
  }
}

/** Appends a `lease-lost` event (`why`) to the job's item, unfenced; never throws. */
export async function noteLeaseLost(
  store: JobStore,
  lease: JobLease,
  why: string,
  now: number,
  log: JobLog,
): Promise<void> {
  await bestEffort('the lost lease', log, (signal) => store.recordLeaseLost?.(lease, why, now, { signal }));
}

/**
 * Counts a dropped copy of the DEAD job `existing` in its history (`life`: a message sent for another
 * life of the key, dropped by this job, DEAD or waiting); never throws.
 */
export async function noteDroppedCopy(
  store: JobStore,
  existing: JobItem,
  messageId: string,
  now: number,
  log: JobLog,
  life?: number,
): Promise<void> {
  await bestEffort('the dropped copy', log, (signal) =>
    store.recordDroppedCopy?.(existing, messageId, now, { signal, ...(life === undefined ? {} : { life }) }),
  );
}

/** Records on the job `existing` the `mismatch` event of a message refused for its payload; never throws. */
export async function noteMismatch(
  store: JobStore,
  existing: JobItem,
  event: MismatchEvent,
  log: JobLog,
): Promise<void> {
  await bestEffort('the payload mismatch', log, (signal) =>
    store.recordMismatch?.(existing, event, { signal }),
  );
}
