// The history clauses of the edges' writes (docs/protocol.md, "History"): a write's events added to its
// update, and the operators' trim of a full list (a redrive's, a cancel's) over the list they read.

import { HISTORY_MAX, type HistoryEvent } from '../contract/job-history.ts';
import type { JobItem } from '../contract/job-item.ts';
import type { HistoryWrite } from '../decisions/history.ts';
import type { JobItemUpdate } from './update.ts';

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
 * of a write that carries it may be the list's, not the fence's (fence.ts, `refusedFencedWrite`).
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
 * A full history replaced by its trimmed copy (`replace`, `dropped` more in `historyDropped`), read at
 * `readVersion` with the list `read`: written only over that very list. The version alone does not tell
 * it: a heartbeat's event (renewals keep the version), a lost lease's event and a dropped copy's count
 * change the list and not the version, and the replace would write them over.
 */
export interface TrimmedHistory {
  readonly replace: readonly HistoryEvent[];
  readonly dropped: number;
  readonly readVersion: number;
  readonly read: readonly HistoryEvent[];
}

/** `item`'s full history with `event` added and its oldest events dropped, to be written over it as read. */
export function trimmedHistory(
  item: Pick<JobItem, 'history' | 'version'>,
  event: HistoryEvent,
): TrimmedHistory {
  const read = item.history ?? [];
  const list = [...read, event];
  return {
    replace: list.slice(-HISTORY_MAX),
    dropped: list.length - HISTORY_MAX,
    readVersion: item.version,
    read,
  };
}

/** The SET of a trimmed history ({@link TrimmedHistory}), its values in {@link trimmedValues}. */
export const TRIMMED_SET =
  '#history = :history, #historyDropped = if_not_exists(#historyDropped, :zero) + :dropped';

/**
 * The condition that the item's history is still the list `read` (not empty): as long, and ending in the
 * same event. Any write since appended to it (longer), trimmed it (another last event: every trim ends
 * in the events it added) or grew its last `dropped` event (another count). One event in the request,
 * not the list.
 */
export function historyAsRead(read: readonly HistoryEvent[]): string {
  return `size(#history) = :readLength AND #history[${Math.max(0, read.length - 1)}] = :readLast`;
}

/** The values of {@link TRIMMED_SET}, `:readVersion` and {@link historyAsRead}. */
export function trimmedValues(history: TrimmedHistory): Record<string, unknown> {
  const { read } = history;
  return {
    ':history': history.replace,
    ':dropped': history.dropped,
    ':readVersion': history.readVersion,
    ':readLength': read.length,
    ':readLast': read[read.length - 1] ?? null,
  };
}
