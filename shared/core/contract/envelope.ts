import { InvalidEnvelopeError } from '../../errors.ts';
import type { PayloadRef } from './payload-store.ts';

/** The envelope schema version this build reads and writes. */
export const ENVELOPE_VERSION = 1;

/** The largest message SQS takes (1 MiB since August 2025), body and message attributes together. */
export const SQS_MAX_MESSAGE_BYTES = 1_048_576;
/** The smallest `MaximumMessageSize` SQS allows a queue (1 KiB). */
export const SQS_MIN_MESSAGE_BYTES = 1024;

/**
 * Room a dead letter needs beside the body for the `leaseq.*` reason attributes (`deadLetterAttributes`:
 * ten attributes at most, each value cut to 1024 characters, names and data types counted too; at most
 * about 24 KiB even when every character takes 3 bytes of UTF-8).
 */
export const DEAD_LETTER_ATTRIBUTES_RESERVE_BYTES = 32 * 1024;

/**
 * Room a limit's re-send needs beside a body of `maxBodyBytes`: SQS counts message attributes (name, data
 * type and value) toward `MaximumMessageSize`, and the re-send adds `leaseq-origin` (13 + 6 bytes and a
 * message id of 36). The construct gives the jobs queue this much more than the body limit, so every body
 * a worker runs can be re-sent; without it a body near the limit could only be given back, and its
 * bounces would reach the queue's redrive.
 */
export const RESEND_ATTRIBUTES_RESERVE_BYTES = 256;

/**
 * The body limit (`maxBodyBytes`) of the worker, the producer and `leaseq send` unless told: the SQS
 * maximum less the letter reserve; the construct gives the jobs queue a `MaximumMessageSize` of it plus
 * {@link RESEND_ATTRIBUTES_RESERVE_BYTES}. A body up to it is sent, run, and when it fails for good still fits into the DLQ (1 MiB) with its
 * reason attributes. @default 1015808 (1 MiB less 32 KiB)
 */
export const DEFAULT_MAX_BODY_BYTES = SQS_MAX_MESSAGE_BYTES - DEAD_LETTER_ATTRIBUTES_RESERVE_BYTES;

/**
 * Checks a body limit: an integer SQS can have as a queue's `MaximumMessageSize` (1024 to 1048576).
 * @throws RangeError naming `name` and the range.
 */
export function checkMaxBodyBytes(value: number, name = 'maxBodyBytes'): number {
  if (Number.isInteger(value) && value >= SQS_MIN_MESSAGE_BYTES && value <= SQS_MAX_MESSAGE_BYTES)
    return value;
  throw new RangeError(
    `${name} must be an integer from ${SQS_MIN_MESSAGE_BYTES} to ${SQS_MAX_MESSAGE_BYTES} (the sizes SQS allows a message), received ${value}`,
  );
}

/**
 * The one body-size check (the worker's parse, the producer and `leaseq send` all call it): undefined when
 * `body` fits, else the problem naming its size and the limit.
 */
export function bodySizeProblem(body: string, maxBytes: number = DEFAULT_MAX_BODY_BYTES): string | undefined {
  // A UTF-16 code unit is at most 3 bytes of UTF-8: a body this short fits without being measured.
  if (body.length * 3 <= maxBytes) return undefined;
  const size = Buffer.byteLength(body, 'utf8');
  return size > maxBytes
    ? `body is ${size} bytes, above the ${maxBytes} byte limit (maxBodyBytes)`
    : undefined;
}

// Printable ASCII without spaces' edge cases: 0x21-0x7E plus inner space; 1-256 characters.
const DEDUP_KEY = /^[\x21-\x7e](?:[\x20-\x7e]{0,254}[\x21-\x7e])?$/;
// Letters, digits and . _ : -; 1-128 characters.
const JOB_TYPE = /^[A-Za-z0-9._:-]{1,128}$/;
/**
 * The envelope `id`: 1-128 printable ASCII characters (space to `~`), no space at the start or end; the
 * dedup key's alphabet, since `leaseq send --file` uses the key as id when an entry has none. No control
 * characters, no line breaks, nothing outside ASCII: the id is written to logs and shown by the CLI.
 */
export const ENVELOPE_ID = /^[\x21-\x7e](?:[\x20-\x7e]{0,126}[\x21-\x7e])?$/;
// W3C Trace Context `traceparent`: version-traceid-parentid-flags, lower-case hex.
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/**
 * True for a valid W3C Trace Context `traceparent`: `vv-<32 hex>-<16 hex>-<2 hex>` in lower case, where
 * the version is not `ff` (forbidden by the spec) and neither the trace id nor the parent id is all zeros
 * (both invalid by the spec).
 */
export function isValidTraceparent(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  const match = TRACEPARENT.exec(value);
  if (!match) return false;
  const [, version, traceId, parentId] = match;
  return version !== 'ff' && !/^0+$/.test(traceId ?? '') && !/^0+$/.test(parentId ?? '');
}

// The envelope's checks are plain code rather than a schema library: the worker's bundle then carries no
// schema library of leaseq's own, and a cold start builds no schemas (docs/performance.md, "Cold start").
// Each check gives the first problem of its field, worded as the schema this replaced worded it (test/
// unit/core/contract/envelope-reference.test.ts compares the two on thousands of bodies).

/** What a JSON value is, as a type problem names it. */
function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

function expected(type: string, value: unknown): string {
  return `Invalid input: expected ${type}, received ${typeName(value)}`;
}

/** A string's problem: its type, then each check in order; undefined when it passes them all. */
function stringProblem(value: unknown, ...checks: ((s: string) => string | undefined)[]): string | undefined {
  if (typeof value !== 'string') return expected('string', value);
  for (const check of checks) {
    const problem = check(value);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

/**
 * A string's length in characters (code points): a surrogate pair counts once, a lone surrogate once.
 * The envelope's and the worker settings' length limits count these, as the zod schemas they replaced did.
 */
export function characterCount(s: string): number {
  let count = s.length;
  for (let i = 0; i < s.length - 1; i++) {
    if ((s.charCodeAt(i) & 0xfc00) === 0xd800 && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      count -= 1;
      i += 1;
    }
  }
  return count;
}

const minLength = (n: number) => (s: string) =>
  characterCount(s) >= n ? undefined : `Too small: expected string to have >=${n} characters`;
const maxLength = (n: number) => (s: string) =>
  characterCount(s) <= n ? undefined : `Too big: expected string to have <=${n} characters`;
const matches = (pattern: RegExp, problem: string) => (s: string) => (pattern.test(s) ? undefined : problem);

// RFC 3339 date-time with seconds and a zone (Z or +hh:mm / -hh:mm), optional fraction of a second; the
// day must exist in its month (29 February in leap years only).
const DATE_TIME =
  /^(\d{4})-(\d\d)-(\d\d)T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)$/;

function isDateTime(s: string): boolean {
  const match = DATE_TIME.exec(s);
  if (!match) return false;
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1];
  return days !== undefined && day >= 1 && day <= days;
}

function payloadRefProblem(value: unknown): { path: string; problem: string } | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { path: 'payloadRef', problem: expected('object', value) };
  }
  const ref = value as Record<string, unknown>;
  const fields: [string, string | undefined][] = [
    [
      'bucket',
      stringProblem(
        ref.bucket,
        matches(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'payloadRef.bucket must be an S3 bucket name'),
      ),
    ],
    ['key', stringProblem(ref.key, minLength(1), maxLength(1024))],
    ['bytes', wholeNumberProblem(ref.bytes)],
    [
      'sha256',
      stringProblem(
        ref.sha256,
        matches(/^[0-9a-f]{64}$/, 'payloadRef.sha256 must be 64 lower-case hex digits'),
      ),
    ],
  ];
  const bad = fields.find(([, problem]) => problem !== undefined);
  return bad ? { path: `payloadRef.${bad[0]}`, problem: bad[1] as string } : undefined;
}

/** A whole number from 0 up to the largest safe integer. */
function wholeNumberProblem(value: unknown): string | undefined {
  if (typeof value !== 'number' || !Number.isFinite(value)) return expected('number', value);
  if (!Number.isInteger(value)) return 'Invalid input: expected int, received number';
  // An integer outside the safe range is refused as such before its sign, as the schema did.
  if (value > Number.MAX_SAFE_INTEGER) return `Too big: expected int to be <=${Number.MAX_SAFE_INTEGER}`;
  if (value < Number.MIN_SAFE_INTEGER) return `Too small: expected int to be >=${Number.MIN_SAFE_INTEGER}`;
  if (value < 0) return 'Too small: expected number to be >=0';
  return undefined;
}

/** The first problem of an object that has `v: 1`, by field in envelope order, with the field's path. */
function envelopeProblem(raw: Record<string, unknown>): { path: string; problem: string } | undefined {
  const fields: [string, () => string | undefined][] = [
    [
      'id',
      () =>
        stringProblem(
          raw.id,
          matches(ENVELOPE_ID, 'id must be 1-128 printable ASCII characters, no space at the start or end'),
        ),
    ],
    [
      'dedupKey',
      () => stringProblem(raw.dedupKey, matches(DEDUP_KEY, 'dedupKey must be 1-256 printable characters')),
    ],
    [
      'type',
      () =>
        stringProblem(
          raw.type,
          minLength(1),
          maxLength(128),
          matches(JOB_TYPE, 'type must be letters, digits and . _ : -'),
        ),
    ],
    [
      'createdAt',
      () => stringProblem(raw.createdAt, (s) => (isDateTime(s) ? undefined : 'Invalid ISO datetime')),
    ],
  ];
  for (const [path, check] of fields) {
    const problem = check();
    if (problem !== undefined) return { path, problem };
  }
  if (raw.payloadRef !== undefined) {
    const problem = payloadRefProblem(raw.payloadRef);
    if (problem) return problem;
  }
  // Required (null is a payload), except beside payloadRef: one or the other.
  if ('payload' in raw === (raw.payloadRef !== undefined)) {
    return {
      path: 'payload',
      problem: 'an envelope carries payload, or payloadRef in its place (a claim check), not both or neither',
    };
  }
  return undefined;
}

/** A claim check (the payload is in S3, see payload-store.ts): in place of `payload`, never beside it. */
export interface EnvelopePayloadRef {
  bucket: string;
  key: string;
  bytes: number;
  sha256: string;
}

/** The shape every reason for a refused body names, so a producer sees what to send. */
export const ENVELOPE_SHAPE = `{v:${ENVELOPE_VERSION}, id, dedupKey, type, createdAt, payload}`;

/** Whether `value` is a dedup key an envelope may carry (what a valid envelope's `dedupKey` matches). */
export function isEnvelopeDedupKey(value: string): boolean {
  // RegExp.test stringifies: a JS caller's 123, null or undefined would pass as "123", "null", "undefined".
  return typeof value === 'string' && DEDUP_KEY.test(value);
}

/** Whether `value` is a job type an envelope may carry (what a valid envelope's `type` matches). */
export function isEnvelopeType(value: string): boolean {
  return JOB_TYPE.test(value);
}

/** A job as it travels in an SQS message body. */
export interface JobEnvelope {
  v: typeof ENVELOPE_VERSION;
  id: string;
  dedupKey: string;
  type: string;
  createdAt: string;
  /** Required (null is a payload), except beside payloadRef. */
  payload?: unknown;
  payloadRef?: EnvelopePayloadRef | undefined;
  /** W3C `traceparent` of the producer's trace; only ever a valid one (see {@link parseEnvelope}). */
  trace?: string;
}

/**
 * Parses and validates a message body. Throws {@link InvalidEnvelopeError} with the problem kind for
 * anything that is not a v1 envelope; the caller dead-letters it with that reason.
 * `knownTypes` (when given) turns an unregistered `type` into a permanent error too.
 * A `trace` that is not a valid W3C traceparent ({@link isValidTraceparent}) is dropped: the envelope
 * is returned without it, so a malformed trace header never costs the job.
 */
export function parseEnvelope(
  body: string,
  options: { maxBytes?: number; isKnownType?: (type: string) => boolean } = {},
): JobEnvelope {
  const tooLarge = bodySizeProblem(body, options.maxBytes);
  if (tooLarge) throw new InvalidEnvelopeError('too-large', tooLarge);
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch (error) {
    throw new InvalidEnvelopeError(
      'not-json',
      `not a leaseq envelope: the body is not JSON; expected ${ENVELOPE_SHAPE}`,
      error,
    );
  }
  return envelopeOf(raw, options);
}

/**
 * The envelope of a parsed body (parseEnvelope after its JSON.parse; the plain-body reader for a body of
 * the envelope's shape). @throws InvalidEnvelopeError as {@link parseEnvelope}
 */
export function envelopeOf(
  raw: unknown,
  options: { isKnownType?: (type: string) => boolean } = {},
): JobEnvelope {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw) || !('v' in raw)) {
    throw new InvalidEnvelopeError('bad-schema', `not a leaseq envelope: expected ${ENVELOPE_SHAPE}`);
  }
  if (raw.v !== ENVELOPE_VERSION) {
    throw new InvalidEnvelopeError(
      'unknown-version',
      `leaseq envelope version ${JSON.stringify(raw.v)} is not supported; expected ${ENVELOPE_SHAPE}`,
    );
  }
  const fields = raw as Record<string, unknown>;
  const bad = envelopeProblem(fields);
  if (bad) {
    throw new InvalidEnvelopeError(
      'bad-schema',
      `invalid leaseq envelope: ${bad.path}: ${bad.problem}; expected ${ENVELOPE_SHAPE}`,
    );
  }
  const type = fields.type as string;
  if (options.isKnownType && !options.isKnownType(type)) {
    throw new InvalidEnvelopeError('unknown-type', `job type ${type} is not registered`);
  }
  // The envelope's own fields only, in their order; anything else in the body is dropped.
  const envelope: JobEnvelope = {
    v: ENVELOPE_VERSION,
    id: fields.id as string,
    dedupKey: fields.dedupKey as string,
    type,
    createdAt: fields.createdAt as string,
  };
  if ('payload' in fields) envelope.payload = fields.payload;
  if ('payloadRef' in fields) {
    const ref = fields.payloadRef as EnvelopePayloadRef | undefined;
    envelope.payloadRef =
      ref === undefined
        ? undefined
        : { bucket: ref.bucket, key: ref.key, bytes: ref.bytes, sha256: ref.sha256 };
  }
  const trace = fields.trace;
  return isValidTraceparent(trace) ? { ...envelope, trace } : envelope;
}

/**
 * The pointer envelope of a claim check: `envelope` with its payload replaced by `ref`, where the payload's
 * JSON text was stored. Everything the worker decides before running (type, dedupKey, trace) stays in it.
 */
export function claimCheckedEnvelope(envelope: JobEnvelope, ref: PayloadRef): JobEnvelope {
  const { payload: _stored, ...rest } = envelope;
  return { ...rest, payloadRef: { bucket: ref.bucket, key: ref.key, bytes: ref.bytes, sha256: ref.sha256 } };
}

/** Builds a v1 envelope (producers and the CLI use this, so every message has the same shape). */
export function makeEnvelope(input: {
  id: string;
  dedupKey: string;
  type: string;
  payload: unknown;
  createdAt?: Date;
  trace?: string;
}): JobEnvelope {
  return {
    v: ENVELOPE_VERSION,
    id: input.id,
    dedupKey: input.dedupKey,
    type: input.type,
    createdAt: (input.createdAt ?? new Date()).toISOString(),
    payload: input.payload,
    ...(input.trace ? { trace: input.trace } : {}),
  };
}
