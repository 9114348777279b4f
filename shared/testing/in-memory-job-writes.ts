// The write helpers of the in-memory job store (in-memory-job-store.ts): a fenced write that carries
// history, and the answers DynamoDB would give a write the adapter's pre-checks cannot foresee.
import { storeRefusal } from '../core/adapters/store-errors.ts';
import type { FencedWriteResult } from '../core/contract/job-store.ts';
import { type CarriedHistory, sendFitting } from '../core/decisions/history.ts';
import { DYNAMODB_MAX_ITEM_BYTES, validationException } from './in-memory-effects.ts';

/** A fenced write carrying history: done when it applied, undone when not (or it threw). */
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

/**
 * A write's answer as the DynamoDB store gives it: a ValidationException the pre-check (checkJobWrite)
 * could not foresee, such as two Puts of one item when nothing names the table's key, becomes the same
 * StoreRefusedError guardStore makes of DynamoDB's, so the pipeline dead-letters it after one run.
 */
export function refusedAsDynamoDb<T>(operation: string, answer: Promise<T>): Promise<T> {
  return answer.catch((error: unknown) => {
    throw storeRefusal(operation, error) ?? error;
  });
}

/**
 * Throws DynamoDB's ValidationException when a job item holding `result` would pass the item size limit
 * (the result's JSON plus a margin for the item's other attributes).
 */
export function checkJobItemSize(result: unknown): undefined {
  const bytes = Buffer.byteLength(JSON.stringify(result) ?? '') + 2048;
  if (bytes > DYNAMODB_MAX_ITEM_BYTES) {
    throw validationException('Item size to update has exceeded the maximum allowed size');
  }
  return undefined;
}
