// TransactWriteItems on the in-memory tables: all or nothing across tables. Every action is planned on
// the items as they are; if any is refused, nothing is written and the transaction is cancelled with one
// reason per action, in order (the refused item with ReturnValuesOnConditionCheckFailure ALL_OLD).

import type { Item } from '../dynamodb-expressions.ts';
import {
  type CancellationReason,
  marshalled,
  sdkValidationException,
  transactionCanceled,
} from './errors.ts';
import {
  applyWrite,
  ConditionRefusal,
  isApplyRefusal,
  type PlannedWrite,
  planWrite,
  type WriteInput,
  type WriteKind,
} from './item-ops.ts';
import type { Table } from './tables.ts';
import { itemBytes } from './values.ts';

/** Actions in one TransactWriteItems call. */
export const MAX_TRANSACTION_ACTIONS = 100;
/** Bytes of all the items of one transaction (4 MB). */
export const MAX_TRANSACTION_BYTES = 4 * 1024 * 1024;

type Action = WriteInput & { readonly ReturnValuesOnConditionCheckFailure?: string };

/** One TransactItems entry. */
export interface TransactItem {
  readonly Put?: Action;
  readonly Update?: Action;
  readonly Delete?: Action;
  readonly ConditionCheck?: Action;
}

/** What a transaction wrote, per table: the item sizes its write units are counted from. */
export interface TransactionDone {
  readonly writes: readonly PlannedWrite[];
}

/**
 * Runs one transaction. Throws DynamoDB's ValidationException for a request it refuses as a whole, or a
 * TransactionCanceledException; applies every action otherwise. `admit` sees the planned writes before
 * any is applied and may refuse them all by throwing (a partition over its throughput).
 */
export function transactWrite(
  items: readonly TransactItem[] | undefined,
  tableOf: (name: string | undefined) => Table,
  admit?: (writes: readonly PlannedWrite[]) => void,
): TransactionDone {
  const list = items ?? [];
  if (list.length === 0 || list.length > MAX_TRANSACTION_ACTIONS) {
    const bound =
      list.length === 0
        ? 'Member must have length greater than or equal to 1'
        : `Member must have length less than or equal to ${MAX_TRANSACTION_ACTIONS}`;
    throw sdkValidationException(
      `1 validation error detected: Value at 'transactItems' failed to satisfy constraint: ${bound}`,
    );
  }
  const actions = list.map(actionOf);
  const seen = new Set<string>();
  let bytes = 0;
  for (const { kind, input } of actions) {
    const table = tableOf(input.TableName);
    const key = kind === 'put' && input.Item ? table.keyOfItem(input.Item) : table.keyOf(input.Key);
    const id = `${table.schema.name}\u0001${key}`;
    if (seen.has(id)) {
      throw sdkValidationException('Transaction request cannot include multiple operations on one item');
    }
    seen.add(id);
    if (input.Item) bytes += itemBytes(input.Item);
  }
  if (bytes > MAX_TRANSACTION_BYTES) {
    throw sdkValidationException('Transaction request cannot be larger than 4 MB');
  }
  const reasons: CancellationReason[] = [];
  const writes: PlannedWrite[] = [];
  let cancelled = false;
  for (const { kind, input } of actions) {
    try {
      writes.push(planWrite(tableOf(input.TableName), kind, input));
      reasons.push({ Code: 'None' });
    } catch (error) {
      cancelled = true;
      reasons.push(reasonOf(error, input));
    }
  }
  if (cancelled) throw transactionCanceled(reasons);
  admit?.(writes);
  for (const write of writes) applyWrite(write);
  return { writes };
}

function actionOf(entry: TransactItem): { readonly kind: WriteKind; readonly input: Action } {
  const kinds = (['Put', 'Update', 'Delete', 'ConditionCheck'] as const).filter(
    (k) => entry[k] !== undefined,
  );
  if (kinds.length !== 1) {
    throw sdkValidationException('TransactItems can only contain one of Check, Put, Update or Delete');
  }
  const name = kinds[0] as 'Put' | 'Update' | 'Delete' | 'ConditionCheck';
  const kind: WriteKind = name === 'ConditionCheck' ? 'check' : (name.toLowerCase() as WriteKind);
  return { kind, input: entry[name] as Action };
}

function reasonOf(error: unknown, input: Action): CancellationReason {
  if (error instanceof ConditionRefusal) {
    const item: Item | undefined = error.old;
    const withItem = input.ReturnValuesOnConditionCheckFailure === 'ALL_OLD' && item !== undefined;
    return {
      Code: 'ConditionalCheckFailed',
      Message: 'The conditional request failed',
      ...(withItem ? { Item: marshalled(item) } : {}),
    };
  }
  if (
    error instanceof Error &&
    error.name === 'ValidationException' &&
    (isApplyRefusal(error) || /item size/i.test(error.message))
  ) {
    return { Code: 'ValidationError', Message: error.message };
  }
  throw error;
}
