// How the job store sends a job item's write: one UpdateItem, or a transaction with the job item first
// and the effects after it, its old item asked for on refusal (ALL_OLD) and handed to the edge's reader
// (core/protocol/). The fenced writes (checkpoint, commit, renewal, release, dead marking) share one path.

import {
  ConditionalCheckFailedException,
  type ReturnValuesOnConditionCheckFailure,
  TransactionCanceledException,
} from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { JobItem } from '../contract/job-item.ts';
import type { Effect, FencedWriteResult, JobLease } from '../contract/job-store.ts';
import type { CarriedHistory } from '../decisions/history.ts';
import { sendFitting } from '../decisions/history.ts';
import { cancelledFencedWrite, refusedFencedWrite } from '../protocol/fence.ts';
import { HISTORY_KNOWN } from '../protocol/history-writes.ts';
import type { JobItemUpdate, RawItem } from '../protocol/update.ts';
import { guardStore } from './store-errors.ts';

const ALL_OLD: ReturnValuesOnConditionCheckFailure = 'ALL_OLD';

/**
 * Sends `update` alone, its old item returned on refusal; with `returnOld`, on success too (ALL_OLD: the
 * answer's `Attributes`, what it returns).
 */
export async function sendUpdate(
  doc: DynamoDBDocumentClient,
  operation: string,
  signal: AbortSignal | undefined,
  update: JobItemUpdate,
  returnOld = false,
): Promise<JobItem | undefined> {
  const out = await guardStore({ operation, key: String(update.Key.dedupKey) }, signal, (http) =>
    doc.send(
      new UpdateCommand({
        ...update,
        ...(returnOld ? { ReturnValues: 'ALL_OLD' } : {}),
        ReturnValuesOnConditionCheckFailure: ALL_OLD,
      }),
      http,
    ),
  );
  return out.Attributes as JobItem | undefined;
}

/** The old item a refused UpdateItem returned (ALL_OLD); anything else is thrown again. */
export function refusedItem(error: unknown): RawItem {
  if (error instanceof ConditionalCheckFailedException && error.Item) return error.Item;
  throw error;
}

/** The old item a refused UpdateItem returned (ALL_OLD), undefined when there was none; anything else is thrown again. */
export function refusal(error: unknown): RawItem | undefined {
  if (error instanceof ConditionalCheckFailedException) return error.Item;
  throw error;
}

/** One transaction: the job item's update first (its old item returned on refusal), then the effects. */
export async function transact(
  doc: DynamoDBDocumentClient,
  operation: string,
  update: JobItemUpdate,
  effects: readonly Effect[],
  signal: AbortSignal | undefined,
): Promise<void> {
  await guardStore({ operation, key: String(update.Key.dedupKey) }, signal, (http) =>
    doc.send(
      new TransactWriteCommand({
        TransactItems: [{ Update: { ...update, ReturnValuesOnConditionCheckFailure: ALL_OLD } }, ...effects],
      }),
      http,
    ),
  );
}

/**
 * The job item's fenced update and the effects, all or nothing. `accept`: a refusal without effects
 * that is not a loss (the item as it is); the call then succeeds without writing.
 */
export async function fencedWrite(
  doc: DynamoDBDocumentClient,
  lease: JobLease,
  operation: string,
  update: JobItemUpdate,
  effects: readonly Effect[],
  signal: AbortSignal | undefined,
  accept?: (old: JobItem) => boolean,
): Promise<FencedWriteResult> {
  const historyKnown = update.ExpressionAttributeValues[HISTORY_KNOWN];
  if (effects.length === 0) {
    try {
      await sendUpdate(doc, operation, signal, update);
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
      const writtenAt = update.ExpressionAttributeValues[':now'];
      refusedFencedWrite(
        lease,
        operation,
        { item: error.Item, writtenAt, cause: error, historyKnown },
        accept,
      );
    }
    return { ok: true };
  }
  try {
    await transact(doc, operation, update, effects, signal);
    return { ok: true };
  } catch (error) {
    if (!(error instanceof TransactionCanceledException)) throw error;
    return cancelledFencedWrite(lease, operation, error, historyKnown);
  }
}

/** Runs a fenced write that carries history: done when it applied, undone when not (or it threw). */
export async function carriedWrite(
  carried: CarriedHistory,
  write: () => Promise<FencedWriteResult>,
): Promise<FencedWriteResult> {
  let out: FencedWriteResult;
  try {
    out = await sendFitting(carried, write);
  } catch (error) {
    carried.undo();
    throw error;
  }
  if (out.ok) carried.done();
  else carried.undo();
  return out;
}

/** An unfenced history write whose refusal changes nothing (a best-effort event: dropped, lease-lost). */
export async function bestEffort(
  doc: DynamoDBDocumentClient,
  operation: string,
  update: JobItemUpdate,
  signal: AbortSignal | undefined,
): Promise<void> {
  try {
    await guardStore({ operation, key: String(update.Key.dedupKey) }, signal, (http) =>
      doc.send(new UpdateCommand(update), http),
    );
  } catch (error) {
    if (error instanceof ConditionalCheckFailedException) return;
    throw error;
  }
}
