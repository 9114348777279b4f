// The fence (docs/protocol.md, "Fencing"): the condition of every write after the claim, the update it
// wraps, and what its refusal means (a write refused by itself, a lost lease, an effect's conflict); and
// the best-effort `lease-lost` event a holder writes once its fence is refused.

import type { TransactionCanceledException } from '@aws-sdk/client-dynamodb';
import { StoreUnavailableError } from '../../errors.ts';
import { HISTORY_MAX, type HistoryEvent } from '../contract/job-history.ts';
import type { JobItem } from '../contract/job-item.ts';
import type { FencedWriteResult, JobLease } from '../contract/job-store.ts';
import { JobStatus } from '../contract/statuses.ts';
import { fenceRefusal, holdsFence } from '../decisions/fence-decision.ts';
import { checkHistoryKnown } from '../decisions/history.ts';
import { type JobItemUpdate, names, type RawItem, unmarshallItem } from './update.ts';

// Every write after the claim: still my lease (owner + token) and the job still running. The status check
// keeps a COMPLETED job from being released or marked DEAD by its own owner after a commit whose answer
// was lost (the owner would otherwise hand a finished job out again).
export const FENCE = '#owner = :owner AND #token = :token AND #status = :inProgress';

/** An update of this lease's item under the {@link FENCE} (and `ConditionSuffix`, `' AND ...'`). */
export function fencedUpdate(
  tableName: string,
  lease: JobLease,
  parts: {
    readonly UpdateExpression: string;
    readonly ConditionSuffix?: string;
    readonly ExpressionAttributeNames: Record<string, string>;
    readonly ExpressionAttributeValues: Record<string, unknown>;
  },
): JobItemUpdate {
  return {
    TableName: tableName,
    Key: { dedupKey: lease.dedupKey },
    UpdateExpression: parts.UpdateExpression,
    ConditionExpression: FENCE + (parts.ConditionSuffix ?? ''),
    ExpressionAttributeNames: { ...parts.ExpressionAttributeNames, ...names('owner', 'token', 'status') },
    ExpressionAttributeValues: {
      ...parts.ExpressionAttributeValues,
      ':owner': lease.owner,
      ':token': lease.token,
      ':inProgress': JobStatus.InProgress,
    },
  };
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
  // Otherwise the lost lease it means (done after all, if this lease completed the job).
  if (item && accept?.(unmarshallItem(item))) return;
  throw fenceRefusal(lease, operation, item && unmarshallItem(item), cause);
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
    throw fenceRefusal(lease, operation, first.Item && unmarshallItem(first.Item), error);
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
export function effectCancellation(
  operation: string,
  error: TransactionCanceledException,
): FencedWriteResult {
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

/**
 * Best effort, unfenced, after a refused fence: a `lease-lost` event appended to the item if it exists and
 * its history has room (this write knows no list to cut, so it never passes HISTORY_MAX). No protocol
 * field changes; its refusal (gone, or the history full) means nothing to record it on.
 */
export function leaseLostUpdate(
  tableName: string,
  dedupKey: string,
  event: HistoryEvent,
  problem: { readonly problemShard: string; readonly problemAt: number },
): JobItemUpdate {
  return {
    TableName: tableName,
    Key: { dedupKey },
    UpdateExpression:
      'SET #history = list_append(if_not_exists(#history, :noEvents), :events), ' +
      '#problemShard = :problemShard, #problemAt = :problemAt',
    ConditionExpression:
      'attribute_exists(#dedupKey) AND (attribute_not_exists(#history) OR size(#history) < :historyMax)',
    ExpressionAttributeNames: names('dedupKey', 'history', 'problemShard', 'problemAt'),
    ExpressionAttributeValues: {
      ':noEvents': [],
      ':events': [event],
      ':historyMax': HISTORY_MAX,
      ':problemShard': problem.problemShard,
      ':problemAt': problem.problemAt,
    },
  };
}
