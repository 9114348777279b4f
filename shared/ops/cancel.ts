import { DynamoDbJobStore } from '../core/adapters/dynamodb-job-store.ts';
import { isEnvelopeDedupKey } from '../core/contract/envelope.ts';
import type { CancelResult } from '../core/contract/job-store.ts';
import { OpsError } from './ops-errors.ts';
import type { OpsTarget } from './target.ts';

export interface CancelJobOptions {
  /** Why, kept (capped) in the job's `cancelled` history event. */
  readonly reason?: string;
  /** Who: user@host, or the caller's identity. @default 'unknown' */
  readonly by?: string;
  /** @default Date.now() */
  readonly now?: number;
}

/**
 * Cancels the job under `dedupKey` (docs/jobs.md, "Cancelling a job"): one conditional write of its item.
 * A job not finished stops for good (a running one at its next heartbeat); no item leaves a tombstone that
 * drops the job's message when it comes; a COMPLETED or DEAD job answers `finished` and is left alone.
 * @throws OpsError for a key no envelope can carry (empty, over 256 characters, not printable)
 */
export async function cancelJob(
  target: OpsTarget,
  dedupKey: string,
  options: CancelJobOptions = {},
): Promise<CancelResult> {
  checkDedupKey(dedupKey);
  const store = new DynamoDbJobStore({ client: target.clients.doc, tableName: target.names.jobsTable });
  return store.cancel(dedupKey, {
    now: options.now ?? Date.now(),
    ...(options.by === undefined ? {} : { by: options.by }),
    ...(options.reason === undefined ? {} : { reason: options.reason }),
  });
}

/** A dedup key a job can have: a tombstone under any other would only litter the table. */
export function checkDedupKey(dedupKey: string): void {
  if (!isEnvelopeDedupKey(dedupKey)) {
    // Its length only: the key itself may hold what a terminal must not print.
    throw new OpsError(
      `not a dedupKey (${typeof dedupKey === 'string' ? `${dedupKey.length} characters` : `a ${typeof dedupKey}`}): a job's dedupKey is 1-256 printable characters`,
    );
  }
}

/** One line saying what a cancel did, for the CLI and the UI. */
export function describeCancel(dedupKey: string, result: CancelResult): string {
  switch (result.outcome) {
    case 'cancelled':
      return result.wasRunning
        ? `cancelled ${dedupKey}: it was running; it stops at its next heartbeat and commits nothing`
        : `cancelled ${dedupKey}: it was waiting for a retry; the retry will not run`;
    case 'tombstone':
      return `cancelled ${dedupKey}: no job under this key yet; its message is dropped when it comes`;
    case 'finished':
      return `not cancelled: ${dedupKey} is already finished (${result.status})`;
    case 'already-cancelled':
      return `${dedupKey} was already cancelled`;
  }
}
