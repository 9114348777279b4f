// The errors of the in-memory DynamoDB, as the SDK's own exception classes with what DynamoDB sends with
// them. The SDK and the document client hand a refusal's item over as DynamoDB sent it: in the low-level
// (typed) attribute form, which core/protocol/update.ts unmarshalls.

import {
  ConditionalCheckFailedException,
  DynamoDBServiceException,
  InternalServerError,
  ProvisionedThroughputExceededException,
  TransactionCanceledException,
  TransactionConflictException,
} from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { Item } from '../dynamodb-expressions.ts';

const REQUEST_ID = 'in-memory';

/** An answer's `$metadata`, as the SDK fills it. */
export function metadata(status = 200): {
  httpStatusCode: number;
  requestId: string;
  attempts: number;
  totalRetryDelay: number;
} {
  return { httpStatusCode: status, requestId: REQUEST_ID, attempts: 1, totalRetryDelay: 0 };
}

/** An item in DynamoDB's typed attribute form, as a refusal carries it. */
export function marshalled(item: Item): Record<string, unknown> {
  return marshall(item, { removeUndefinedValues: true, convertClassInstanceToMap: false }) as Record<
    string,
    unknown
  >;
}

/** A refused condition; with ReturnValuesOnConditionCheckFailure ALL_OLD, the item it was tested on. */
export function conditionFailed(old: Item | undefined, returnOld: boolean): ConditionalCheckFailedException {
  return unstacked(
    () =>
      new ConditionalCheckFailedException({
        message: 'The conditional request failed',
        $metadata: metadata(400),
        ...(returnOld && old !== undefined ? { Item: marshalled(old) as never } : {}),
      }),
  );
}

/**
 * A refusal built without a stack: an everyday answer (a fenced write refused, a claim of a busy job),
 * whose frames would only name this file; the SDK's own come from its deserializer, not the caller.
 */
function unstacked<T>(build: () => T): T {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return build();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/** One action's reason in a cancelled transaction. */
export interface CancellationReason {
  readonly Code: 'None' | 'ConditionalCheckFailed' | 'ValidationError' | 'TransactionConflict' | string;
  readonly Message?: string;
  readonly Item?: Record<string, unknown>;
}

/** A cancelled transaction, with one reason per action in order. */
export function transactionCanceled(reasons: readonly CancellationReason[]): TransactionCanceledException {
  return unstacked(
    () =>
      new TransactionCanceledException({
        message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${reasons.map((r) => r.Code).join(', ')}]`,
        $metadata: metadata(400),
        CancellationReasons: reasons.map((r) => ({ ...r })) as never,
      }),
  );
}

/** DynamoDB's refusal of an invalid request (HTTP 400), as the SDK builds it (no modelled class). */
export function sdkValidationException(message: string): DynamoDBServiceException {
  return new DynamoDBServiceException({
    name: 'ValidationException',
    $fault: 'client',
    message,
    $metadata: metadata(400),
  });
}

/** The ValidationException the expression engine threw (a plain Error so named), as the SDK's. */
export function asSdkError(error: unknown): unknown {
  if (
    error instanceof Error &&
    error.name === 'ValidationException' &&
    !(error instanceof DynamoDBServiceException)
  ) {
    return sdkValidationException(error.message);
  }
  return error;
}

/** Throttled (the SDK gives up after its retries). */
export function throttled(): ProvisionedThroughputExceededException {
  return new ProvisionedThroughputExceededException({
    message:
      'The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.',
    $metadata: metadata(400),
  });
}

/**
 * A partition over its throughput (partition-limits.ts): DynamoDB's on-demand and provisioned tables
 * both answer a hot key with ProvisionedThroughputExceededException and a `KeyRangeThroughputExceeded`
 * throttling reason naming the table or index
 * (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_ThrottlingReason.html).
 */
export function partitionThrottled(reason: {
  readonly reason: string;
  readonly resource: string;
}): ProvisionedThroughputExceededException {
  return unstacked(
    () =>
      new ProvisionedThroughputExceededException({
        message:
          'Throughput exceeds the current capacity for one or more partitions of your table or index: check for a hot key',
        $metadata: metadata(400),
        ThrottlingReasons: [{ ...reason }],
      }),
  );
}

/** A transaction one of whose items' partitions is over its throughput: `ThrottlingError` on that action. */
export function transactionThrottled(actions: number, throttledAction: number): TransactionCanceledException {
  return transactionCanceled(
    Array.from({ length: actions }, (_, i) =>
      i === throttledAction
        ? {
            Code: 'ThrottlingError',
            Message: 'Throughput exceeds the current capacity of your table or index: check for a hot key',
          }
        : { Code: 'None' },
    ),
  );
}

/** A 500 from DynamoDB: the default injected fault (guardStore calls it StoreUnavailableError). */
export function internalError(): InternalServerError {
  return new InternalServerError({
    message: 'injected fault: internal server error',
    $metadata: metadata(500),
  });
}

/** A request that got no answer in time (the SDK's own TimeoutError has no HTTP status). */
export function timedOut(): Error {
  const error = new Error('injected fault: the request timed out, its answer is lost');
  error.name = 'TimeoutError';
  Object.assign(error, { $metadata: { attempts: 1, totalRetryDelay: 0 } });
  return error;
}

/** A single write that met a transaction in flight on its item. */
export function transactionConflict(): TransactionConflictException {
  return new TransactionConflictException({
    message: 'Transaction is ongoing for the item',
    $metadata: metadata(400),
  });
}
