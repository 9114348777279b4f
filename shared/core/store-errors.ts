import { StoreUnavailableError } from './errors.ts';

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

/** Runs a store call, turning "store not serving" failures into {@link StoreUnavailableError}. */
export async function guardStore<T>(operation: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (isStoreUnavailable(error)) throw new StoreUnavailableError(operation, error);
    throw error;
  }
}
