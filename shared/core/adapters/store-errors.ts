import { createHash } from 'node:crypto';
import {
  type StoreItemKind,
  type StoreProblem,
  StoreRefusedError,
  type StoreThrottle,
  StoreUnavailableError,
} from '../../errors.ts';
import { SLOT_ITEM_PREFIX } from '../contract/lease-store.ts';
import { RATE_ITEM_PREFIX } from '../contract/rate-store.ts';

interface AwsLikeError {
  name?: string;
  code?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number };
  $retryable?: unknown;
  CancellationReasons?: readonly { Code?: string; Message?: string }[];
  ThrottlingReasons?: readonly { reason?: string }[];
  throttlingReasons?: readonly { reason?: string }[];
}

/** DynamoDB's throttling errors (a partition, a table, or the account over its throughput). */
const THROTTLE_NAMES = new Set([
  'ThrottlingException',
  'ProvisionedThroughputExceededException',
  'RequestLimitExceeded',
]);

const UNAVAILABLE_NAMES = new Set([
  'ThrottlingException',
  'ProvisionedThroughputExceededException',
  'RequestLimitExceeded',
  'InternalServerError',
  'InternalFailure',
  'ServiceUnavailable',
  'ServiceUnavailableException',
  'TimeoutError',
  'RequestTimeout',
  'RequestTimeoutException',
  'LimitExceededException',
  // A write that met a transaction in flight on its item (DynamoDB answers 400, and the SDK does not
  // retry it): the item is busy for milliseconds; trying again helps, and it is not the job's failure.
  'TransactionConflictException',
  // A transaction the SDK retried (same ClientRequestToken) while its first send is still in flight: the
  // first may yet land. Its answer is unknown, as for a timeout; the commit settles it with one read
  // (`commit` in pipeline/commit.ts), and any other write's retry is fenced.
  'TransactionInProgressException',
]);

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/**
 * True when an SDK error means "the store is not serving us right now" (throttled, 5xx, timeout, network)
 * rather than "the store answered no" (a condition failed, validation): only the former may be retried
 * blindly, and neither may ever lead to running a job unguarded.
 */
export function isStoreUnavailable(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const e = error as AwsLikeError;
  if (e.name && UNAVAILABLE_NAMES.has(e.name)) return true;
  if (throttledAction(e) !== undefined) return true;
  if (e.code && NETWORK_CODES.has(e.code)) return true;
  if (e.name && NETWORK_CODES.has(e.name)) return true;
  const status = e.$metadata?.httpStatusCode;
  if (typeof status === 'number') return status >= 500;
  // An SDK error that never got an HTTP answer (socket closed, request aborted). Errors without SDK
  // metadata (a value the marshaller refused, a bug) are not outages: retrying would not help.
  return '$metadata' in error;
}

/**
 * Options handed to the SDK's `send` for one call: its abort signal, when the call is bounded, and the
 * store operation it serves. The SDK hands these to its HTTP handler, which reads only the signal; the
 * operation is there for a client that serves requests itself (leaseq/testing's in-memory DynamoDB
 * aims its injected faults at an operation by this name).
 */
export interface HttpCallOptions {
  readonly abortSignal?: AbortSignal;
  readonly leaseqOperation: string;
}

/**
 * Runs a store call, turning "store not serving" failures into {@link StoreUnavailableError}. With a
 * `signal`, the call is abandoned when it aborts (the SDK stops waiting and retrying) and fails as
 * unavailable: the caller cannot know whether the write was applied.
 */
export async function guardStore<T>(
  target: StoreCall,
  call: (http: HttpCallOptions) => Promise<T>,
): Promise<T>;
export async function guardStore<T>(
  target: StoreCall,
  signal: AbortSignal | undefined,
  call: (http: HttpCallOptions) => Promise<T>,
): Promise<T>;
export async function guardStore<T>(
  target: StoreCall,
  signalOrCall: AbortSignal | undefined | ((http: HttpCallOptions) => Promise<T>),
  maybeCall?: (http: HttpCallOptions) => Promise<T>,
): Promise<T> {
  const call = typeof signalOrCall === 'function' ? signalOrCall : maybeCall;
  const signal = typeof signalOrCall === 'function' ? undefined : signalOrCall;
  if (!call) throw new TypeError('guardStore needs a call');
  const operation = typeof target === 'string' ? target : target.operation;
  if (signal?.aborted) throw new StoreUnavailableError(operation, abortCause(signal));
  try {
    return await call(
      signal ? { abortSignal: signal, leaseqOperation: operation } : { leaseqOperation: operation },
    );
  } catch (error) {
    if (signal?.aborted) throw new StoreUnavailableError(operation, abortCause(signal));
    if (isStoreUnavailable(error)) {
      const key = typeof target === 'string' ? undefined : target.key;
      throw new StoreUnavailableError(operation, error, throttleOf(operation, key, error));
    }
    throw storeRefusal(operation, error) ?? error;
  }
}

/**
 * A store call: its operation, or the operation and the key of the item it is about (a throttle names
 * the item by its kind and the key's hash).
 */
export type StoreCall = string | { readonly operation: string; readonly key?: string };

/** The index of a cancelled transaction's throttled action (`ThrottlingError`), if one was. */
function throttledAction(e: AwsLikeError): number | undefined {
  if (e.name !== 'TransactionCanceledException') return undefined;
  const index = (e.CancellationReasons ?? []).findIndex(
    (r) => r.Code === 'ThrottlingError' || r.Code === 'ProvisionedThroughputExceeded',
  );
  return index < 0 ? undefined : index;
}

/**
 * What a throttle names: the item's kind (from the call and its key; a transaction's action past the
 * job item is an effect's or a fence's item) and its key's hash. Undefined for any other outage.
 */
export function throttleOf(
  operation: string,
  key: string | undefined,
  error: unknown,
): StoreThrottle | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const e = error as AwsLikeError;
  const action = throttledAction(e);
  if (action === undefined && !(e.name && THROTTLE_NAMES.has(e.name))) return undefined;
  const reason = (e.ThrottlingReasons ?? e.throttlingReasons)?.[0]?.reason;
  const itemKind: StoreItemKind = action !== undefined && action > 0 ? 'effect' : kindOf(operation, key);
  return {
    itemKind,
    ...(key !== undefined && itemKind !== 'effect' ? { keyHash: keyHash(key) } : {}),
    ...(reason ? { reason } : {}),
  };
}

function kindOf(operation: string, key: string | undefined): StoreItemKind {
  if (operation.startsWith('rate')) return 'rate';
  if (!operation.startsWith('lease')) return 'job';
  if (key?.startsWith(SLOT_ITEM_PREFIX)) return 'slot';
  if (key?.startsWith(RATE_ITEM_PREFIX)) return 'rate';
  return 'lease';
}

/** The first 12 hex digits of SHA-256 of a key: tells hot keys apart in logs without naming them. */
export function keyHash(key: string): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 12);
}

function abortCause(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof Error) return reason;
  const error = new Error(`call abandoned: ${String(reason ?? 'aborted')}`);
  error.name = 'TimeoutError';
  return error;
}

/**
 * The {@link StoreRefusedError} a DynamoDB answer means: a `ValidationException`, or a transaction
 * cancelled because one of its items failed validation (an update that would grow an item past 400 KB);
 * undefined for any other error. The problem is read from DynamoDB's message, its only signal (these
 * texts have been stable for years); a text not recognised is `bad-request`, still permanent.
 */
export function storeRefusal(operation: string, error: unknown): StoreRefusedError | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const e = error as AwsLikeError;
  if (e.name === 'ValidationException') {
    const text = String(e.message ?? '');
    return new StoreRefusedError(problemOf(text), operation, `DynamoDB refused the write: ${text}`, error);
  }
  if (e.name === 'TransactionCanceledException') {
    const reasons = e.CancellationReasons ?? [];
    const index = reasons.findIndex((r) => r.Code === 'ValidationError');
    if (index < 0) return undefined;
    const text = String(reasons[index]?.Message ?? '');
    const which = index === 0 ? 'the job item' : `transaction item ${index}`;
    return new StoreRefusedError(problemOf(text), operation, `DynamoDB refused ${which}: ${text}`, error);
  }
  return undefined;
}

const PROBLEM_TEXTS: readonly [RegExp, StoreProblem][] = [
  [/item size/i, 'item-too-large'],
  [/transactItems.*length less than or equal to/i, 'too-many-items'],
  [/multiple operations on one item/i, 'same-item-twice'],
  [/4 ?MB|transaction (request )?size/i, 'transaction-too-large'],
  [
    /expression attribute value.*(not defined|unused)|ExpressionAttributeValues|nesting levels|numeric value|key element does not match|empty (string|set)/i,
    'bad-value',
  ],
];

function problemOf(text: string): StoreProblem {
  return PROBLEM_TEXTS.find(([pattern]) => pattern.test(text))?.[1] ?? 'bad-request';
}
