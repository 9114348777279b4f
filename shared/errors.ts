import { describe } from './error-text.ts';

// Until the adapters' and the model's own splits are merged: they import these from here.

/**
 * One error hierarchy for leaseq. Every error says whether trying again later can help (`retryable`);
 * callers classify with `instanceof`, never by matching message text.
 */
export class LeaseqError extends Error {
  /** True when the same job may succeed on a later attempt. */
  readonly retryable: boolean;

  constructor(message: string, options: { retryable: boolean; cause?: unknown }) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'LeaseqError';
    this.retryable = options.retryable;
  }
}

/** Why an envelope was refused; also the `reason` attribute of its dead letter. */
export const ENVELOPE_PROBLEMS = [
  'not-json',
  'bad-schema',
  'unknown-version',
  'unknown-type',
  'too-large',
  // The envelope is fine; its payload fails the job type's schema.
  'bad-payload',
  // The envelope points to a claim-checked payload (payloadRef) this worker cannot have: the object is
  // gone (expired, deleted), or the worker has no payload bucket or another one.
  'payload-missing',
  // The claim-checked object is not the payload that was sent: its sha256 differs from the pointer's.
  'payload-changed',
  // A plain body (not an envelope, docs/envelope.md "Plain bodies"): its key cannot be read (the path
  // selects nothing, the value is not a dedup key, the key function threw) ...
  'plain-key',
  // ... its type cannot be read (the path selects no string, the type function threw) ...
  'plain-type',
  // ... or it is not what the queue's `unwrap` expects (not an SNS notification, an S3 message of several
  // records or a test event, an SNS Message that is not JSON, a payload function that threw).
  'plain-shape',
] as const;
export type EnvelopeProblem = (typeof ENVELOPE_PROBLEMS)[number];

/**
 * Problems of the body itself: the same bytes are refused the same way by every deployment, so a redrive
 * can only dead-letter them again. (An unknown type or version, or a payload a schema refuses, may run
 * after a deploy of the code that knows it.)
 */
export const BODY_PROBLEMS: readonly EnvelopeProblem[] = ['not-json', 'bad-schema', 'too-large'];

/** The message body is not a job leaseq can run: dead-lettered at once, never retried. */
export class InvalidEnvelopeError extends LeaseqError {
  readonly problem: EnvelopeProblem;
  /**
   * A plain body's refusal: what was read of the job before it (the type, then the dedup key). Its dead
   * letter carries these, never a `dedupKey` field of the producer's own body.
   */
  readonly plainJob?: { readonly type?: string; readonly dedupKey?: string };

  constructor(
    problem: EnvelopeProblem,
    message: string,
    cause?: unknown,
    plainJob?: { readonly type?: string; readonly dedupKey?: string },
  ) {
    super(message, { retryable: false, cause });
    this.name = 'InvalidEnvelopeError';
    this.problem = problem;
    if (plainJob !== undefined) this.plainJob = plainJob;
  }
}

/** A claim-checked payload's object is not in its bucket (expired or deleted): no retry brings it back. */
export class PayloadMissingError extends LeaseqError {
  constructor(message: string, cause?: unknown) {
    super(message, { retryable: false, cause });
    this.name = 'PayloadMissingError';
  }
}

/** The `reason` of a dead letter whose dedupKey belongs to a job of another type. */
export const DEDUP_KEY_COLLISION = 'dedup-key-collision';

/**
 * A message whose `dedupKey` is already taken by a job of another type: it is never run (it would run
 * on the other job's item and checkpoint) and is dead-lettered at once with reason
 * {@link DEDUP_KEY_COLLISION}; the other job is left as it was.
 */
export class DedupKeyCollisionError extends LeaseqError {
  constructor(type: string, heldBy: string | undefined) {
    super(
      `the dedupKey belongs to a job of ${heldBy === undefined ? 'another type' : `type ${heldBy}`}; this message is ${type}: not run (give each type keys of its own)`,
      { retryable: false },
    );
    this.name = 'DedupKeyCollisionError';
  }
}

/**
 * A message whose `dedupKey` names a job of its type with another payload (the payload hashes differ,
 * docs/protocol.md "A duplicate with another payload"): not a copy, never run, dead-lettered with reason
 * `payload-mismatch` (the type's `onPayloadMismatch` default); the job is left as it was.
 */
export class PayloadMismatchError extends LeaseqError {
  readonly jobHash: string;
  readonly messageHash: string;
  constructor(jobHash: string, messageHash: string) {
    super(
      `the dedupKey names a job with another payload (job's payload hash ${jobHash}, this message's ${messageHash}): not run (send another payload under a key of its own, or set the type's onPayloadMismatch)`,
      { retryable: false },
    );
    this.name = 'PayloadMismatchError';
    this.jobHash = jobHash;
    this.messageHash = messageHash;
  }
}

/** A job handler's way to say "this will never work": the job is dead-lettered at once. */
export class PermanentJobError extends LeaseqError {
  constructor(message: string, cause?: unknown) {
    super(message, { retryable: false, cause });
    this.name = 'PermanentJobError';
  }
}

/** A job handler's way to say "try again later" explicitly (any unknown error is treated the same). */
export class TransientJobError extends LeaseqError {
  constructor(message: string, cause?: unknown) {
    super(message, { retryable: true, cause });
    this.name = 'TransientJobError';
  }
}

/**
 * The shared store (DynamoDB) could not be reached or refused service (throttling, 5xx, timeouts after
 * the SDK's own retries). The job is never run unguarded: the message goes back with a backoff.
 */
export class StoreUnavailableError extends LeaseqError {
  readonly operation: string;
  /** When DynamoDB throttled the call: which leaseq item, by kind and key hash. */
  readonly throttle: StoreThrottle | undefined;

  constructor(operation: string, cause: unknown, throttle?: StoreThrottle) {
    super(`store unavailable during ${operation}: ${describe(cause)}`, { retryable: true, cause });
    this.name = 'StoreUnavailableError';
    this.operation = operation;
    this.throttle = throttle;
  }
}

/** The kinds of leaseq item a throttle names: a job item, a named lease, a rate log, a slot, an effect's. */
export type StoreItemKind = 'job' | 'lease' | 'rate' | 'slot' | 'effect';

/** A throttled store call: its partition (one item's key) was over DynamoDB's per-partition throughput. */
export interface StoreThrottle {
  readonly itemKind: StoreItemKind;
  /** The first 12 hex digits of SHA-256 of the item's key (never the key: it may be a tenant's data). */
  readonly keyHash?: string;
  /** DynamoDB's throttling reason (`TableWriteKeyRangeThroughputExceeded`, ...), when it gave one. */
  readonly reason?: string;
}

/**
 * Why the store can never take a job's write (docs/jobs.md, "Limits of a write"); also the dead letter's
 * reason, `store-<problem>`: more than 100 items in one transaction (the job item and named-lease fences
 * count), two operations on one item, an item over 400 KB, a transaction over 4 MB, a value the store
 * cannot hold (undefined, NaN, a class instance), or any other request DynamoDB refuses as invalid.
 */
export const STORE_PROBLEMS = [
  'too-many-items',
  'same-item-twice',
  'item-too-large',
  'transaction-too-large',
  'bad-value',
  'bad-request',
] as const;
export type StoreProblem = (typeof STORE_PROBLEMS)[number];

/**
 * The store refuses a write as invalid (a DynamoDB `ValidationException`, or leaseq's check before the
 * write): the same write is refused on every attempt, so the job is dead-lettered at once. The message
 * starts with the problem, so no cap on the stored text cuts it off.
 */
export class StoreRefusedError extends LeaseqError {
  readonly problem: StoreProblem;
  readonly operation: string;

  constructor(problem: StoreProblem, operation: string, detail: string, cause?: unknown) {
    super(`${problem}: ${operation}: ${detail}`, { retryable: false, cause });
    this.name = 'StoreRefusedError';
    this.problem = problem;
    this.operation = operation;
  }
}

/**
 * A conditional write the store could not settle: the item it was conditioned on is gone (TTL deleted
 * it since it was read), or it kept changing under the write's tries. Nothing was written. Retryable:
 * the same action, tried again, decides afresh on the item as it is then.
 */
export class StoreConflictError extends LeaseqError {
  readonly operation: string;

  constructor(operation: string, detail: string, cause?: unknown) {
    super(`${operation}: ${detail}`, { retryable: true, cause });
    this.name = 'StoreConflictError';
    this.operation = operation;
  }
}

/**
 * This worker no longer owns the job or lease: a renewal, checkpoint or commit was refused because
 * the owner or fencing token changed. Whatever the worker was doing must stop; its writes are refused.
 */
export class LeaseLostError extends LeaseqError {
  readonly key: string;
  readonly token: number;
  /**
   * The write was refused because this very lease already completed the job (a commit went through but
   * its answer was lost): the job is done, not lost.
   */
  readonly completedByThisLease: boolean;

  constructor(key: string, token: number, detail: string, cause?: unknown, completedByThisLease = false) {
    super(`lease on ${key} (token ${token}) lost: ${detail}`, { retryable: true, cause });
    this.name = 'LeaseLostError';
    this.key = key;
    this.token = token;
    this.completedByThisLease = completedByThisLease;
  }
}

/**
 * The lease ran out because no renewal got through in time, not because anyone else took the job. The
 * worker stopped the job; if nobody claimed it meanwhile, its fenced release still applies. The attempt
 * is refunded only when `renewalFailed`: a renewal was sent and failed or hung (the store was slow or
 * unreachable). A worker that sent none in time (its job blocked the event loop) uses the attempt.
 */
export class LeaseRanOutError extends LeaseLostError {
  readonly renewalFailed: boolean;

  constructor(
    key: string,
    token: number,
    detail: string,
    cause?: unknown,
    options: { readonly renewalFailed?: boolean } = {},
  ) {
    super(key, token, detail, cause);
    this.name = 'LeaseRanOutError';
    this.renewalFailed = options.renewalFailed ?? false;
  }
}

/**
 * The job was cancelled (`leaseq cancel`, `JobProducer.cancel`): a fenced write of its holder (a renewal,
 * a checkpoint, the commit) found the item CANCELLED. The job's signal aborts with it; the worker deletes
 * its message (no retry, no dead letter). A LeaseLostError, so every fence that stops a lost lease stops
 * a cancelled job too.
 */
export class JobCancelledError extends LeaseLostError {
  constructor(key: string, token: number, detail: string, cause?: unknown) {
    super(key, token, detail, cause);
    this.name = 'JobCancelledError';
  }
}

/**
 * Optimistic write kept conflicting after the in-process retries: give the job back with a delay.
 * `detail` says what conflicted (table, key, the version expected and found; core/model/conflict.ts).
 * `rowUnversioned`: the read-back found the row without its version attribute, so no other writer is in
 * the way and no re-run can get through (a row seeded by hand): the conflict then uses an attempt.
 */
export class OptimisticConflictError extends LeaseqError {
  readonly tries: number;
  readonly detail: string | undefined;
  readonly rowUnversioned: boolean;

  constructor(
    what: string,
    tries: number,
    cause?: unknown,
    detail?: string,
    options: { readonly rowUnversioned?: boolean } = {},
  ) {
    super(`optimistic write on ${what} conflicted ${tries} times${detail ? `: ${detail}` : ''}`, {
      retryable: true,
      cause,
    });
    this.name = 'OptimisticConflictError';
    this.tries = tries;
    this.detail = detail;
    this.rowUnversioned = options.rowUnversioned ?? false;
  }
}

/**
 * A named lease (`ctx.withLease`) was taken from the job before a write it guarded; the write applied
 * nothing. The job still holds its own lease: it is given back and retried after a backoff.
 */
export class NamedLeaseLostError extends LeaseqError {
  readonly key: string;
  readonly token: number;

  constructor(key: string, token: number, what: string) {
    super(`named lease ${key} (token ${token}) no longer held at the ${what}; nothing was written`, {
      retryable: true,
    });
    this.name = 'NamedLeaseLostError';
    this.key = key;
    this.token = token;
  }
}

/** `withLease` could not take a named lease before its wait ran out. */
export class LeaseBusyError extends LeaseqError {
  readonly key: string;

  constructor(key: string, waitedMs: number) {
    super(`lease ${key} still held by another owner after ${waitedMs} ms`, { retryable: true });
    this.name = 'LeaseBusyError';
    this.key = key;
  }
}

/**
 * A fast-path job (`fastPath: true`) called something that needs a lease (`ctx.step`, `ctx.withLease`,
 * `ctx.saveCheckpoint`). Nothing was written: the processor runs the job again under a claim, in the
 * same invocation, without counting an attempt for the fast run.
 */
export class FastPathNeedsLeaseError extends LeaseqError {
  constructor(what: string) {
    super(`${what} needs a lease; this fast-path job runs leased instead`, { retryable: true });
    this.name = 'FastPathNeedsLeaseError';
  }
}

/** The job was stopped because the invocation's deadline was near; it is given back for a retry. */
export class DeadlineError extends LeaseqError {
  constructor(message: string) {
    super(message, { retryable: true });
    this.name = 'DeadlineError';
  }
}

/**
 * SQS refused a dead letter for what it carries (its attributes' characters or the letter's size): the
 * same letter would be refused on every try. `code` is SQS's error code. The dead-letterer sends a
 * minimal letter instead (docs/reliability.md, "Dead letters").
 */
export class LetterRefusedError extends LeaseqError {
  readonly code: string;

  constructor(code: string, cause?: unknown) {
    super(`SQS refused the dead letter (${code})`, { retryable: false, cause });
    this.name = 'LetterRefusedError';
    this.code = code;
  }
}

/**
 * A setting, a job definition or a deployment property is wrong (a missing table variable, a duplicate
 * job type, a bad name). Raised where the setting is read, with the value received and what was expected.
 */
export class ConfigError extends LeaseqError {
  constructor(message: string, cause?: unknown) {
    super(message, { retryable: false, cause });
    this.name = 'ConfigError';
  }
}
