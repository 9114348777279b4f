// What a refused conditional write of the `jobs` table means: the item DynamoDB returned with the
// refusal (ALL_OLD), or a cancelled transaction's reasons, turned into the job store's outcomes (a claim
// refused or ours after all, a lost lease, an effect conflict, an outage).

import type { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { type LeaseLostError, StoreUnavailableError } from '../../errors.ts';
import type { HistoryEvent } from '../contract/job-history.ts';
import type { JobItem } from '../contract/job-item.ts';
import type {
  CancelResult,
  ClaimRequest,
  ClaimResult,
  FastCommitRequest,
  FastCommitResult,
  FencedWriteResult,
  JobLease,
} from '../contract/job-store.ts';
import { JobStatus } from '../contract/statuses.ts';
import { isOwnClaim } from '../decisions/claim-decision.ts';
import { fenceRefusal, holdsFence } from '../decisions/fence-decision.ts';
import { checkHistoryKnown } from '../decisions/history.ts';

/** A refusal's old item, in the low-level (typed) attribute form DynamoDB returns it in. */
export type RawItem = Record<string, unknown>;

/** A refused claim: someone else's job, unless the refusal was of this very claim (then we hold it). */
export function refusedClaim(item: RawItem, req: ClaimRequest): ClaimResult {
  const existing = unmarshallItem(item);
  if (!isOwnClaim(existing, req)) return { claimed: false, existing };
  // Our claim went through and only its answer was lost (the SDK retried it): hold it.
  const lease: JobLease = {
    dedupKey: req.dedupKey,
    owner: req.owner,
    token: existing.token,
    attempts: existing.attempts,
    messageId: req.messageId,
    version: existing.version,
    leaseUntil: existing.leaseUntil,
    ...(existing.refunds ? { refunds: existing.refunds } : {}),
    ...(existing.conflicts ? { conflicts: existing.conflicts } : {}),
    ...(existing.checkpoint ? { checkpoint: existing.checkpoint } : {}),
    // The claim wrote no event: the list is the item's, so this lease's appends keep within the bound.
    ...(existing.history?.length ? { history: [...existing.history] } : {}),
  };
  // `previous` is the item as the claim left it: what the claim does not write (a recorded dead-letter
  // cause, the last error) is as it was before, and the processor must see it (a recorded cause is
  // finished, not run again).
  return { claimed: true, lease, kind: existing.attempts > 1 ? 'retry' : 'fresh', previous: existing };
}

/** A refused fast commit without effects: refused, unless it was this very commit. */
export function refusedFastCommit(item: RawItem, req: FastCommitRequest): FastCommitResult {
  const existing = unmarshallItem(item);
  // Refused by itself: the answer was lost and the SDK retried a write that went through.
  if (isOwnFastCommit(existing, req)) return { ok: true };
  return { ok: false, reason: 'refused', existing };
}

/** A cancelled fast commit with effects: the claim's condition refused it, or an effect's did. */
export function cancelledFastCommit(error: TransactionCanceledException): FastCommitResult {
  const first = error.CancellationReasons?.[0];
  if (first?.Code === 'ConditionalCheckFailed' && first.Item) {
    return { ok: false, reason: 'refused', existing: unmarshallItem(first.Item) };
  }
  return effectCancellation('claim-and-complete', error);
}

/**
 * A refused fenced write without effects. Returns when the refusal is no loss: the write was refused by
 * itself (see {@link isOwnWrite}), or `accept` takes the item as it is. Throws the lost lease otherwise.
 */
export function refusedFencedWrite(
  lease: JobLease,
  operation: string,
  refusal: {
    readonly item: RawItem | undefined;
    readonly writtenAt: unknown;
    readonly cause: unknown;
    /** The list length a trim of the history expected (HISTORY_KNOWN), when the write trims it. */
    readonly historyKnown?: unknown;
  },
  accept?: (old: JobItem) => boolean,
): void {
  const { item, writtenAt, cause } = refusal;
  if (isOwnWrite(item, lease, writtenAt)) return;
  throwIfHistoryMoved(lease, item, refusal.historyKnown);
  if (item && accept?.(unmarshallItem(item))) return;
  throw refusalError(lease, operation, item, cause);
}

/**
 * A cancelled fenced write with effects: the fence refused it (thrown), or an effect did. `historyKnown`:
 * as for {@link refusedFencedWrite}.
 */
export function cancelledFencedWrite(
  lease: JobLease,
  operation: string,
  error: TransactionCanceledException,
  historyKnown?: unknown,
): FencedWriteResult {
  const first = error.CancellationReasons?.[0];
  if (first?.Code === 'ConditionalCheckFailed') {
    throwIfHistoryMoved(lease, first.Item, historyKnown);
    throw refusalError(lease, operation, first.Item, error);
  }
  return effectCancellation(operation, error);
}

/**
 * A trim refused with the fence still holding, over a list of another length than the one it expected:
 * another writer appended meanwhile (HistoryMovedError: the trim is built again over the list returned).
 */
function throwIfHistoryMoved(lease: JobLease, item: RawItem | undefined, historyKnown: unknown): void {
  if (item === undefined || typeof historyKnown !== 'number') return;
  const old = unmarshallItem(item);
  if (holdsFence(old, lease))
    checkHistoryKnown(old, { mode: 'replace', list: [], dropped: 0, known: historyKnown });
}

/**
 * A cancelled transaction whose first item (the job item) passed: a throttled transaction is an outage;
 * a refused or busy effect (or lease fence) is an effect conflict, nothing written. Throws otherwise.
 */
function effectCancellation(operation: string, error: TransactionCanceledException): FencedWriteResult {
  const reasons = error.CancellationReasons ?? [];
  if (reasons.some((r) => r.Code === 'ThrottlingError' || r.Code === 'ProvisionedThroughputExceeded')) {
    throw new StoreUnavailableError(operation, error);
  }
  const index = reasons.findIndex(
    (r, i) => i > 0 && (r.Code === 'ConditionalCheckFailed' || r.Code === 'TransactionConflict'),
  );
  if (index > 0) {
    // A transaction conflict (another write to that item in flight, e.g. a renewal) is not a
    // failed condition: worth telling apart for named-lease fences.
    const busy = reasons[index]?.Code === 'TransactionConflict';
    return { ok: false, reason: 'effect-conflict', index: index - 1, ...(busy ? { busy } : {}) };
  }
  // Conflicts on the job item itself (a concurrent renew) are transient too.
  if (reasons.some((r) => r.Code === 'TransactionConflict')) {
    return { ok: false, reason: 'effect-conflict', index: -1 };
  }
  throw error;
}

/** A refused fast commit that was this very commit: COMPLETED by our owner and message at our time. */
function isOwnFastCommit(old: JobItem, req: FastCommitRequest): boolean {
  return (
    old.status === JobStatus.Completed &&
    old.owner === req.owner &&
    old.messageId === req.messageId &&
    old.claimedAt === req.now
  );
}

/**
 * True when a refused write was refused by itself: the item already carries what this very write set
 * (this lease's token, the version after ours, our timestamp). That is a write whose answer was lost and
 * which the SDK retried; it went through. (Transactions need no such check: the SDK retries them with
 * the same ClientRequestToken, which DynamoDB treats as the same request.)
 */
function isOwnWrite(item: RawItem | undefined, lease: JobLease, writtenAt: unknown): boolean {
  if (!item || typeof writtenAt !== 'number') return false;
  const old = unmarshallItem(item);
  // A cancel keeps the token and counts the version too: its item is never this lease's own write.
  return (
    old.status !== JobStatus.Cancelled &&
    old.token === lease.token &&
    old.version === lease.version + 1 &&
    old.updatedAt === writtenAt
  );
}

/** The lost lease a refused fenced write means (done after all, if this lease completed the job). */
function refusalError(
  lease: JobLease,
  operation: string,
  item: RawItem | undefined,
  cause: unknown,
): LeaseLostError {
  return fenceRefusal(lease, operation, item === undefined ? undefined : unmarshallItem(item), cause);
}

/** A cancel's answer from the item it replaced (ALL_OLD; undefined: there was none, a tombstone now). */
export function cancelAnswer(old: JobItem | undefined): CancelResult {
  if (old === undefined) return { outcome: 'tombstone' };
  const running = old.status === JobStatus.InProgress;
  return { outcome: 'cancelled', status: running ? 'IN_PROGRESS' : 'RETRY_WAIT', wasRunning: running };
}

/**
 * A refused cancel: the job was finished, or cancelled before (the answer); or it is unfinished and only
 * its full history refused the append (`item`: the caller replaces the list at its version). A refusal by
 * this very cancel (its write landed, its answer was lost and the SDK sent it again: the item's last event
 * is `event`, written at its time) answers what that write did, read from the item it left.
 */
export function refusedCancel(
  raw: RawItem | undefined,
  event?: HistoryEvent & { readonly e: 'cancelled' },
): CancelResult | { readonly item: JobItem } {
  if (raw === undefined) throw new Error('unreachable: a refused cancel without its item');
  const item = unmarshallItem(raw);
  switch (item.status) {
    case JobStatus.Completed:
      return { outcome: 'finished', status: 'COMPLETED' };
    case JobStatus.Dead:
      return { outcome: 'finished', status: 'DEAD' };
    case JobStatus.Cancelled:
      return event && isOwnCancel(item, event)
        ? ownCancelAnswer(item)
        : { outcome: 'already-cancelled', status: 'CANCELLED' };
    default:
      // Its dead-lettering began (the fence recorded the cause): its end is decided.
      return item.deadReason !== undefined ? { outcome: 'finished', status: 'DEAD' } : { item };
  }
}

/** The item a cancel left is this cancel's: written at its time, its event last. */
function isOwnCancel(item: JobItem, event: HistoryEvent & { readonly e: 'cancelled' }): boolean {
  const last = item.history?.at(-1);
  return (
    item.updatedAt === event.at &&
    last?.e === 'cancelled' &&
    last.at === event.at &&
    last.by === event.by &&
    last.reason === event.reason
  );
}

/**
 * What this cancel's landed write did, from the item it left: a tombstone has no type (a job's first
 * claim writes one); a running job keeps its owner (a release removes it, so a waiting job has none).
 */
function ownCancelAnswer(item: JobItem): CancelResult {
  if (item.type === undefined) return { outcome: 'tombstone' };
  const running = item.owner !== undefined;
  return { outcome: 'cancelled', status: running ? 'IN_PROGRESS' : 'RETRY_WAIT', wasRunning: running };
}

function unmarshallItem(item: RawItem): JobItem {
  // ConditionalCheckFailedException.Item arrives in the low-level (typed) attribute form.
  return unmarshall(item as Parameters<typeof unmarshall>[0]) as unknown as JobItem;
}
