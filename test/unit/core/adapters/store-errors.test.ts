import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import {
  guardStore,
  isStoreUnavailable,
  storeRefusal,
} from '../../../../shared/core/adapters/store-errors.ts';
import { StoreRefusedError, StoreUnavailableError } from '../../../../shared/errors.ts';

const sdkError = (name: string, status?: number, extra: Record<string, unknown> = {}) =>
  Object.assign(new Error(name), {
    name,
    $metadata: status === undefined ? {} : { httpStatusCode: status },
    ...extra,
  });

describe('Function: isStoreUnavailable', () => {
  it('calls throttling, 5xx, timeouts and network failures an outage', () => {
    expect(isStoreUnavailable(sdkError('ThrottlingException', 400))).toBe(true);
    expect(isStoreUnavailable(sdkError('ProvisionedThroughputExceededException', 400))).toBe(true);
    expect(isStoreUnavailable(sdkError('InternalServerError', 500))).toBe(true);
    expect(isStoreUnavailable(sdkError('Whatever', 503))).toBe(true);
    expect(isStoreUnavailable(sdkError('TimeoutError'))).toBe(true);
    expect(
      isStoreUnavailable(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })),
    ).toBe(true);
    expect(isStoreUnavailable(sdkError('Error'))).toBe(true); // SDK error that never got an answer
    // A write that met a transaction in flight on its item: busy, worth trying again, not the job's fault.
    expect(isStoreUnavailable(sdkError('TransactionConflictException', 400))).toBe(true);
  });

  it('does not call a refusal, a validation error or a bug an outage', () => {
    const refused = new ConditionalCheckFailedException({
      message: 'no',
      $metadata: { httpStatusCode: 400 },
    });
    expect(isStoreUnavailable(refused)).toBe(false);
    expect(isStoreUnavailable(sdkError('ValidationException', 400))).toBe(false);
    expect(isStoreUnavailable(sdkError('AccessDeniedException', 400))).toBe(false);
    expect(isStoreUnavailable(new TypeError('Unsupported type passed: [object Date]'))).toBe(false);
    expect(isStoreUnavailable('boom')).toBe(false);
  });
});

describe('Function: guardStore', () => {
  it('wraps outages in StoreUnavailableError and passes other errors through', async () => {
    await expect(
      guardStore('claim', () => Promise.reject(sdkError('ServiceUnavailable', 503))),
    ).rejects.toBeInstanceOf(StoreUnavailableError);
    const bug = new TypeError('bad value');
    await expect(guardStore('claim', () => Promise.reject(bug))).rejects.toBe(bug);
  });
});

describe('Function: storeRefusal', () => {
  it("names the limit of each of DynamoDB's validation answers; anything else it refuses is bad-request", () => {
    const refusal = (message: string) =>
      storeRefusal('complete', sdkError('ValidationException', 400, { message }));
    expect(refusal('Item size has exceeded the maximum allowed size')?.problem).toBe('item-too-large');
    expect(refusal('Item size to update has exceeded the maximum allowed size')?.problem).toBe(
      'item-too-large',
    );
    expect(
      refusal(
        "1 validation error detected: Value '[...]' at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to 100",
      )?.problem,
    ).toBe('too-many-items');
    expect(refusal('Transaction request cannot include multiple operations on one item')?.problem).toBe(
      'same-item-twice',
    );
    expect(refusal('Transaction request exceeds the 4MB transaction size limit')?.problem).toBe(
      'transaction-too-large',
    );
    expect(refusal('Invalid UpdateExpression: Syntax error')?.problem).toBe('bad-request');
  });

  it('reads a transaction cancelled by a validation error of one item, and no other cancellation', () => {
    const cancelled = (codes: [string, string?][]) =>
      sdkError('TransactionCanceledException', 400, {
        CancellationReasons: codes.map(([Code, Message]) => ({ Code, Message })),
      });
    const refused = storeRefusal(
      'complete',
      cancelled([['None'], ['ValidationError', 'Item size to update has exceeded the maximum allowed size']]),
    );
    expect(refused).toBeInstanceOf(StoreRefusedError);
    expect(refused?.problem).toBe('item-too-large');
    expect(refused?.message).toMatch(/^item-too-large: complete: DynamoDB refused transaction item 1/);
    expect(storeRefusal('complete', cancelled([['None'], ['ConditionalCheckFailed']]))).toBeUndefined();
    expect(storeRefusal('complete', sdkError('ConditionalCheckFailedException', 400))).toBeUndefined();
  });

  it('is what guardStore throws for a validation error (never retried as an outage)', async () => {
    const error = await guardStore('checkpoint', () =>
      Promise.reject(
        sdkError('ValidationException', 400, { message: 'Item size has exceeded the maximum allowed size' }),
      ),
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreRefusedError);
    expect((error as StoreRefusedError).retryable).toBe(false);
  });

  it('calls a transaction retried while in flight (TransactionInProgressException) an unknown answer', async () => {
    // The commit then settles it with its one read, like a timeout.
    const error = await guardStore('complete', () =>
      Promise.reject(sdkError('TransactionInProgressException', 400)),
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
  });
});
