// The DynamoDB expressions of a job item's history (docs/protocol.md, "History"): a write's events added
// to its update, the operators' trim of a full list over the list they read, and the best-effort appends
// (a lost lease, a dropped copy). Pure, like dynamodb-job-expressions.ts, whose updates they extend.

import { HISTORY_MAX, type HistoryEvent } from '../contract/job-history.ts';
import type { JobItem } from '../contract/job-item.ts';
import { JobStatus } from '../contract/statuses.ts';
import type { HistoryWrite } from '../decisions/history.ts';
import type { JobItemUpdate } from './dynamodb-job-expressions.ts';

/**
 * `update` with a history write added to the same request (docs/protocol.md, "History"): the events cost
 * item bytes, never a request. Appends with `list_append(if_not_exists(...))`, or replaces the list and
 * ADDs the dropped count when the writer's known list would pass HISTORY_MAX; a problem event also sets
 * the `problems` index keys (alone for a `keys` write). A replace applies only over a list as long as the
 * one the writer knew (`overKnownList`, default true). Without `history`, `update` unchanged.
 */
export function withHistory(
  update: JobItemUpdate,
  history: HistoryWrite | undefined,
  options: { readonly overKnownList?: boolean } = {},
): JobItemUpdate {
  if (history === undefined) return update;
  const sets =
    history.mode === 'keys'
      ? []
      : history.mode === 'append'
        ? ['#history = list_append(if_not_exists(#history, :noEvents), :events)']
        : ['#history = :events'];
  const names: Record<string, string> = history.mode === 'keys' ? {} : { '#history': 'history' };
  const values: Record<string, unknown> =
    history.mode === 'keys'
      ? {}
      : history.mode === 'append'
        ? { ':noEvents': [], ':events': history.events }
        : { ':events': history.list };
  if (history.problemShard !== undefined && history.problemAt !== undefined) {
    sets.push('#problemShard = :problemShard', '#problemAt = :problemAt');
    names['#problemShard'] = 'problemShard';
    names['#problemAt'] = 'problemAt';
    values[':problemShard'] = history.problemShard;
    values[':problemAt'] = history.problemAt;
  }
  let expression = addSets(update.UpdateExpression ?? '', sets.join(', '));
  let condition = update.ConditionExpression;
  if (history.mode === 'replace') {
    expression += ' ADD #historyDropped :historyDropped';
    names['#historyDropped'] = 'historyDropped';
    values[':historyDropped'] = history.dropped;
    if (options.overKnownList !== false) {
      // Only over the list the writer knew: its other writers only append (a lost lease's event), so
      // the length tells it; refused, the write is built again over the list returned (HISTORY_KNOWN).
      condition = `${condition === undefined ? '' : `(${condition}) AND `}size(#history) = ${HISTORY_KNOWN}`;
      values[HISTORY_KNOWN] = history.known;
    }
  }
  return {
    ...update,
    ...(condition === undefined ? {} : { ConditionExpression: condition }),
    UpdateExpression: expression,
    ExpressionAttributeNames: { ...update.ExpressionAttributeNames, ...names },
    ExpressionAttributeValues: { ...update.ExpressionAttributeValues, ...values },
  };
}

/**
 * The placeholder of the length a holder's trim expects the item's list to have (withHistory); a refusal
 * of a write that carries it may be the list's, not the fence's (dynamodb-refusals.ts).
 */
export const HISTORY_KNOWN = ':historyKnown';

/** `sets` added to the SET clause of `expression` (which starts with one). */
function addSets(expression: string, sets: string): string {
  if (!expression.startsWith('SET ')) throw new Error(`unreachable: no SET clause in ${expression}`);
  const remove = expression.indexOf(' REMOVE ');
  return remove < 0
    ? `${expression}, ${sets}`
    : `${expression.slice(0, remove)}, ${sets}${expression.slice(remove)}`;
}

/**
 * Best effort, unfenced: a `lease-lost` event appended to the item if it exists and its history has room
 * (this write knows no list to cut, so it never passes HISTORY_MAX). No protocol field changes.
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
    ExpressionAttributeNames: {
      '#dedupKey': 'dedupKey',
      '#history': 'history',
      '#problemShard': 'problemShard',
      '#problemAt': 'problemAt',
    },
    ExpressionAttributeValues: {
      ':noEvents': [],
      ':events': [event],
      ':historyMax': HISTORY_MAX,
      ':problemShard': problem.problemShard,
      ':problemAt': problem.problemAt,
    },
  };
}

/**
 * Best effort: one more dropped copy of the DEAD item `dead`: the last event (at `index`) replaced by the
 * grown `dropped` event when it is one, else the event appended (room permitting). Only while the item is
 * that DEAD item (same token) and, in place, its list is the one read (same length).
 */
export function droppedCopyUpdate(
  tableName: string,
  dead: Pick<JobItem, 'dedupKey' | 'token' | 'history'>,
  dropped: { readonly event: HistoryEvent; readonly index?: number },
): JobItemUpdate {
  const inPlace = dropped.index !== undefined;
  return {
    TableName: tableName,
    Key: { dedupKey: dead.dedupKey },
    UpdateExpression: inPlace
      ? `SET #history[${dropped.index}] = :event`
      : 'SET #history = list_append(if_not_exists(#history, :noEvents), :events)',
    ConditionExpression: inPlace
      ? '#status = :dead AND #token = :token AND size(#history) = :length'
      : '#status = :dead AND #token = :token AND (attribute_not_exists(#history) OR size(#history) < :length)',
    ExpressionAttributeNames: { '#status': 'status', '#token': 'token', '#history': 'history' },
    ExpressionAttributeValues: {
      ':dead': JobStatus.Dead,
      ':token': dead.token,
      ...(inPlace
        ? { ':event': dropped.event, ':length': (dead.history ?? []).length }
        : { ':noEvents': [], ':events': [dropped.event], ':length': HISTORY_MAX }),
    },
  };
}
