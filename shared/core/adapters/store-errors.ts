import { StoreUnavailableError } from '../../errors.ts';

interface AwsLikeError {
  name?: string;
  code?: string;
  $metadata?: { httpStatusCode?: number };
  $retryable?: unknown;
}

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
  if (e.code && NETWORK_CODES.has(e.code)) return true;
  if (e.name && NETWORK_CODES.has(e.name)) return true;
  const status = e.$metadata?.httpStatusCode;
  if (typeof status === 'number') return status >= 500;
  // An SDK error that never got an HTTP answer (socket closed, request aborted). Errors without SDK
  // metadata (a value the marshaller refused, a bug) are not outages: retrying would not help.
  return '$metadata' in error;
}

/** Options handed to the SDK's `send` for one call: its abort signal, when the call is bounded. */
export type HttpCallOptions = { readonly abortSignal?: AbortSignal } | undefined;

/**
 * Runs a store call, turning "store not serving" failures into {@link StoreUnavailableError}. With a
 * `signal`, the call is abandoned when it aborts (the SDK stops waiting and retrying) and fails as
 * unavailable: the caller cannot know whether the write was applied.
 */
export async function guardStore<T>(
  operation: string,
  call: (http: HttpCallOptions) => Promise<T>,
): Promise<T>;
export async function guardStore<T>(
  operation: string,
  signal: AbortSignal | undefined,
  call: (http: HttpCallOptions) => Promise<T>,
): Promise<T>;
export async function guardStore<T>(
  operation: string,
  signalOrCall: AbortSignal | undefined | ((http: HttpCallOptions) => Promise<T>),
  maybeCall?: (http: HttpCallOptions) => Promise<T>,
): Promise<T> {
  const call = typeof signalOrCall === 'function' ? signalOrCall : maybeCall;
  const signal = typeof signalOrCall === 'function' ? undefined : signalOrCall;
  if (!call) throw new TypeError('guardStore needs a call');
  if (signal?.aborted) throw new StoreUnavailableError(operation, abortCause(signal));
  try {
    return await call(signal ? { abortSignal: signal } : undefined);
  } catch (error) {
    if (signal?.aborted) throw new StoreUnavailableError(operation, abortCause(signal));
    if (isStoreUnavailable(error)) throw new StoreUnavailableError(operation, error);
    throw error;
  }
}

function abortCause(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof Error) return reason;
  const error = new Error(`call abandoned: ${String(reason ?? 'aborted')}`);
  error.name = 'TimeoutError';
  return error;
}
