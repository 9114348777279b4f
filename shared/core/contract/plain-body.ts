/**
 * Plain bodies (docs/envelope.md, "Plain bodies"): messages a producer sends as its own JSON, or that SNS,
 * EventBridge or S3 notifications carry, read as jobs without a leaseq envelope. The job module says how
 * (`defineJobs(jobs, { plainBodies })`): which type a body is, its dedup key and its payload, each a path
 * into the body (body-path.ts) or a function of it. An envelope on the same queue is still read as one,
 * told apart by its shape ({@link isEnvelopeShaped}). Pure: the worker reads every body through
 * {@link readJobBody}, which costs one JSON.parse as an envelope does, plus the paths' property reads.
 */
import { ConfigError, InvalidEnvelopeError } from '../../errors.ts';
import { compileBodyPath } from './body-path.ts';
import {
  bodySizeProblem,
  ENVELOPE_ID,
  ENVELOPE_SHAPE,
  ENVELOPE_VERSION,
  envelopeOf,
  isEnvelopeDedupKey,
  isEnvelopeType,
  type JobEnvelope,
  parseEnvelope,
} from './envelope.ts';
import { carrierId, defaultKey, PLAIN_UNWRAPS, type PlainUnwrap, unwrapped } from './plain-carriers.ts';

export { PLAIN_UNWRAPS, type PlainUnwrap } from './plain-carriers.ts';

/** What a key or payload function is given beside the document: the job's type and the carrier's notification. */
export interface PlainJobContext {
  /** The job type read for this body. */
  readonly type: string;
  /** The notification `unwrap` took off (the SNS notification, the EventBridge event, the S3 message); else the body. */
  readonly wrapper: unknown;
  /** Which carrier's notification it was; absent when the queue unwraps nothing. */
  readonly carrier?: PlainUnwrap;
}

/** A dedup key: a path into the document (`order.id`), or a function of it returning the key. */
export type PlainKey = string | ((document: unknown, context: PlainJobContext) => string);

/** How a worker reads bodies that are not envelopes. Validated when the job set is built (`defineJobs`). */
export interface PlainBodies {
  /**
   * Takes the carrier's notification off first, and the paths read what it carries: `sns` the JSON of an
   * SNS notification's `Message` (a subscription without raw message delivery), `eventbridge` an event's
   * `detail`, `s3` the one record of an S3 event notification (a message of several records is refused
   * `invalid-plain-shape`, as is S3's test event). A list takes each body off by the first carrier whose
   * shape it has (a queue both an SNS topic and an EventBridge rule send to); a body of none of them is
   * refused `invalid-plain-shape`. @default none: the paths read the body itself
   */
  readonly unwrap?: PlainUnwrap | readonly PlainUnwrap[];
  /**
   * The job type: a registered type (every plain body is one), `{ path }` to read it from the document, or
   * a function of the document and the notification (`(detail, { wrapper }) => map[wrapper['detail-type']]`).
   */
  readonly type:
    | string
    | { readonly path: string }
    | ((document: unknown, context: Omit<PlainJobContext, 'type'>) => string);
  /**
   * The dedup key: a path or function ({@link PlainKey}), or per type a map of those. A string or whole number
   * (within 2^53) it selects is the key (a number as its JSON text); it must be 1-256 printable ASCII characters.
   * @default none, required; except `s3`: `s3:<bucket>/<object key>@<sequencer>` (a long object key as `#<its SHA-256>`), and `eventbridge`: the event's `id`
   */
  readonly key?: PlainKey | Readonly<Record<string, PlainKey>>;
  /** The job's payload: a path into the document, or a function of it. @default the whole document */
  readonly payload?: string | ((document: unknown, context: PlainJobContext) => unknown);
}

/** Plain bodies compiled once (paths parsed, config checked): what the worker's parse reads every body with. */
export interface PlainBodyReader {
  /** The config as given (a registry of another installed copy of leaseq passes it on). */
  readonly config: PlainBodies;
  read(raw: unknown, message: PlainMessage, isKnownType: (type: string) => boolean): JobEnvelope;
}

/** What the SQS record adds to a plain body's envelope. */
export interface PlainMessage {
  readonly messageId: string;
  /** Epoch ms SQS received the message (`SentTimestamp`): the job's `createdAt`. @default now */
  readonly sentAt?: number | undefined;
}

const refuse = (
  problem: 'plain-key' | 'plain-type' | 'plain-shape',
  message: string,
  cause?: unknown,
  read: { readonly type?: string; readonly dedupKey?: string } = {},
) => new InvalidEnvelopeError(problem, `plain body: ${message}`, cause, read);

function causeText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * True for a body read as an envelope: a JSON object with `v`, `dedupKey` and `type`. Any other body is
 * plain when the worker has plain bodies; a body of that shape with a bad field is a refused envelope.
 */
export function isEnvelopeShaped(raw: unknown): boolean {
  return (
    typeof raw === 'object' &&
    raw !== null &&
    !Array.isArray(raw) &&
    'v' in raw &&
    'dedupKey' in raw &&
    'type' in raw
  );
}

/**
 * Reads a message body as a job: an envelope (parseEnvelope), or with `plain` any other JSON body by its
 * rules. Throws {@link InvalidEnvelopeError} (the dead letter's reason) for a body that is neither.
 */
export function readJobBody(
  body: string,
  options: {
    readonly maxBytes?: number;
    readonly isKnownType: (type: string) => boolean;
    readonly plain?: PlainBodyReader | undefined;
  },
  message: PlainMessage,
): JobEnvelope {
  const { plain } = options;
  if (plain === undefined) return parseEnvelope(body, options);
  const tooLarge = bodySizeProblem(body, options.maxBytes);
  if (tooLarge) throw new InvalidEnvelopeError('too-large', tooLarge);
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch (error) {
    throw new InvalidEnvelopeError(
      'not-json',
      `the body is not JSON; expected a leaseq envelope ${ENVELOPE_SHAPE} or a JSON body this queue's plainBodies read`,
      error,
    );
  }
  if (isEnvelopeShaped(raw)) return envelopeOf(raw, options);
  return plain.read(raw, message, options.isKnownType);
}

type Reader<C> = (document: unknown, context: C) => unknown;

/** A path or a function, as one function of the document. */
function readerOf<C>(name: string, option: string | ((d: unknown, c: C) => unknown)): Reader<C> {
  if (typeof option === 'function') return option;
  if (typeof option !== 'string') {
    throw new ConfigError(
      `plainBodies.${name} must be a path (e.g. "order.id") or a function, received ${typeof option}`,
    );
  }
  try {
    const path = compileBodyPath(option);
    return (document) => path.read(document);
  } catch (error) {
    throw new ConfigError(`plainBodies.${name}: ${causeText(error)}`, error);
  }
}

/**
 * The key's text: a string, or a whole number's (within 2^53) JSON text; else the refusal. A number past
 * 2^53 or with a fraction may not be the one the producer wrote (JSON.parse rounds 2^53 + 1 to 2^53): two
 * orders would share one key and the second be dropped as a copy, so it is refused rather than rounded.
 */
function keyText(value: unknown, what: string): string {
  if (typeof value === 'number' && !Number.isSafeInteger(value)) {
    throw refuse(
      'plain-key',
      `${what} selects a number that is not a whole number within 2^53, which JSON may not hold exactly; send it as a string`,
    );
  }
  const text = typeof value === 'number' ? JSON.stringify(value) : value;
  if (text === undefined) throw refuse('plain-key', `${what} selects nothing`);
  if (typeof text !== 'string') {
    throw refuse(
      'plain-key',
      `${what} selects ${Array.isArray(text) ? 'an array' : typeof text}, expected a string or a number`,
    );
  }
  if (!isEnvelopeDedupKey(text)) {
    throw refuse(
      'plain-key',
      `${what} selects a text of ${text.length} characters that is not a dedup key (1-256 printable ASCII characters, no space at either end)`,
    );
  }
  return text;
}

/** The dedup key read by the type's key reader; its refusals carry the type already read. */
function keyOf(keys: (type: string) => KeyReader, document: unknown, context: PlainJobContext): string {
  try {
    const key = keys(context.type);
    let value: unknown;
    try {
      value = key.read(document, context);
    } catch (error) {
      throw refuse('plain-key', `the key function threw: ${causeText(error)}`, error);
    }
    return keyText(value, key.what);
  } catch (error) {
    if (!(error instanceof InvalidEnvelopeError)) throw error;
    throw new InvalidEnvelopeError(error.problem, error.message, error.cause, { type: context.type });
  }
}

/**
 * Checks and compiles `config` once. `types` (the registry's) checks a fixed type and a per-type key map.
 * @throws ConfigError naming the option and what it expects.
 */
export function compilePlainBodies(config: PlainBodies, types: readonly string[]): PlainBodyReader {
  if (typeof config !== 'object' || config === null) {
    throw new ConfigError(
      `plainBodies must be an object { type, key, unwrap?, payload? }, received ${typeof config}`,
    );
  }
  const unwraps: readonly PlainUnwrap[] =
    config.unwrap === undefined ? [] : Array.isArray(config.unwrap) ? config.unwrap : [config.unwrap];
  for (const unwrap of unwraps) {
    if (!PLAIN_UNWRAPS.includes(unwrap)) {
      throw new ConfigError(
        `plainBodies.unwrap must be one of ${PLAIN_UNWRAPS.join(', ')} (or a list of them), received ${JSON.stringify(unwrap)}`,
      );
    }
  }
  const typeOf = typeReader(config.type, types);
  const keys = keyReaders(config, unwraps, types);
  const payloadOf =
    config.payload === undefined ? (d: unknown) => d : readerOf<PlainJobContext>('payload', config.payload);
  return Object.freeze({
    config,
    read(raw: unknown, message: PlainMessage, isKnownType: (type: string) => boolean): JobEnvelope {
      const { document, wrapper, carrier } = unwrapped(unwraps, raw);
      const carriedBy = { wrapper, ...(carrier ? { carrier } : {}) };
      const type = typeOf(document, carriedBy);
      // A type read from the body is named in the refusal only when it has a type's alphabet.
      if (!isEnvelopeType(type)) {
        throw refuse(
          'plain-type',
          'the type read from the body is not a job type (letters, digits and . _ : -)',
        );
      }
      if (!isKnownType(type)) {
        throw new InvalidEnvelopeError('unknown-type', `job type ${type} is not registered`, undefined, {
          type,
        });
      }
      const context: PlainJobContext = { type, ...carriedBy };
      const dedupKey = keyOf(keys, document, context);
      let payload: unknown;
      try {
        payload = payloadOf(document, context);
      } catch (error) {
        // Key and type were read: the letter carries them, so a redrive --payload-file can correct it.
        throw refuse('plain-shape', `the payload function threw: ${causeText(error)}`, error, {
          type,
          dedupKey,
        });
      }
      const id = carrierId(carrier, wrapper) ?? message.messageId;
      return {
        v: ENVELOPE_VERSION,
        id: ENVELOPE_ID.test(id) ? id : 'plain',
        dedupKey,
        type,
        createdAt: new Date(message.sentAt ?? Date.now()).toISOString(),
        payload,
      };
    },
  });
}

function typeReader(
  option: PlainBodies['type'],
  types: readonly string[],
): (document: unknown, carriedBy: Omit<PlainJobContext, 'type'>) => string {
  if (typeof option === 'string') {
    if (!types.includes(option)) {
      throw new ConfigError(
        `plainBodies.type ${JSON.stringify(option)} is not a job type of this set (${types.join(', ')})`,
      );
    }
    return () => option;
  }
  const fn =
    typeof option === 'object' && option !== null && 'path' in option
      ? readerOf('type.path', option.path)
      : typeof option === 'function'
        ? option
        : undefined;
  if (fn === undefined) {
    throw new ConfigError('plainBodies.type must be a job type, { path } or a function of the body');
  }
  const what =
    typeof option === 'function' ? 'the type function' : `the type path ${(option as { path: string }).path}`;
  return (document, carriedBy) => {
    let type: unknown;
    try {
      type = fn(document, carriedBy);
    } catch (error) {
      throw refuse('plain-type', `the type function threw: ${causeText(error)}`, error);
    }
    if (typeof type !== 'string' || type.length === 0) {
      throw refuse(
        'plain-type',
        `${what} selects ${type === undefined ? 'nothing' : `a ${typeof type}`}, expected a job type`,
      );
    }
    return type;
  };
}

type KeyReader = { readonly read: Reader<PlainJobContext>; readonly what: string };

function keyReaders(
  config: PlainBodies,
  unwraps: readonly PlainUnwrap[],
  types: readonly string[],
): (type: string) => KeyReader {
  const one = (name: string, option: PlainKey): KeyReader => ({
    read: readerOf<PlainJobContext>(name, option),
    what: typeof option === 'function' ? 'the key function' : `the key path ${option}`,
  });
  const { key } = config;
  if (key === undefined) {
    // Only S3 and EventBridge notifications name an event of their own; a producer's JSON (bare or in SNS) has its key.
    if (unwraps.length === 0 || unwraps.includes('sns')) {
      throw new ConfigError(
        'plainBodies.key is required (a path such as "order.id", or a function of the body); only unwrap s3 and eventbridge have a default',
      );
    }
    const what =
      "the default key (an S3 object event's bucket, key and sequencer; an EventBridge event's id)";
    return () => ({ read: defaultKey, what });
  }
  if (typeof key === 'string' || typeof key === 'function') {
    const reader = one('key', key);
    return () => reader;
  }
  const map = new Map<string, KeyReader>();
  for (const [type, option] of Object.entries(key)) {
    if (!types.includes(type))
      throw new ConfigError(`plainBodies.key names ${JSON.stringify(type)}, not a job type of this set`);
    map.set(type, one(`key.${type}`, option));
  }
  return (type) => {
    const reader = map.get(type);
    if (reader === undefined) throw refuse('plain-key', `plainBodies.key names no key for job type ${type}`);
    return reader;
  };
}
