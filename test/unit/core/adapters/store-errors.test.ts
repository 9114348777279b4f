import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { guardStore, isStoreUnavailable } from '../../../../shared/core/adapters/store-errors.ts';
import { StoreUnavailableError } from '../../../../shared/errors.ts';

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
