/**
 * The carriers of plain bodies (docs/envelope.md, "Plain bodies", unwrap): how an SNS notification, an
 * EventBridge event or an S3 event notification is told apart and taken off, and the keys and ids they
 * give a job of their own. Pure; plain-body.ts reads the rest of the body.
 */
import { createHash } from 'node:crypto';
import { InvalidEnvelopeError } from '../../errors.ts';
import { compileBodyPath } from './body-path.ts';
import { isEnvelopeDedupKey } from './envelope.ts';

/** The carriers whose notification `plainBodies.unwrap` takes off before the paths are read. */
export const PLAIN_UNWRAPS = ['sns', 'eventbridge', 's3'] as const;
export type PlainUnwrap = (typeof PLAIN_UNWRAPS)[number];

const refuse = (message: string, cause?: unknown) =>
  new InvalidEnvelopeError('plain-shape', `plain body: ${message}`, cause, {});

/** Each carrier's shape (what tells its notification apart) and what it carries. */
const CARRIERS: Readonly<
  Record<PlainUnwrap, { readonly is: (o: Record<string, unknown>) => boolean; readonly shape: string }>
> = {
  sns: {
    is: (o) => o.Type === 'Notification' && typeof o.Message === 'string',
    shape: 'an SNS notification {Type: "Notification", Message}',
  },
  eventbridge: {
    is: (o) => typeof o['detail-type'] === 'string' && typeof o.source === 'string' && 'detail' in o,
    shape: 'an EventBridge event {source, detail-type, detail}',
  },
  s3: {
    is: (o) => Array.isArray(o.Records) || o.Event === 's3:TestEvent',
    shape: 'an S3 event notification {Records: [one record]}',
  },
};

/** The carrier's notification off (the first of `unwraps` whose shape the body has), or the refusal. */
export function unwrapped(
  unwraps: readonly PlainUnwrap[],
  raw: unknown,
): { document: unknown; wrapper: unknown; carrier?: PlainUnwrap } {
  if (unwraps.length === 0) return { document: raw, wrapper: raw };
  const o =
    typeof raw === 'object' && raw !== null && !Array.isArray(raw) ? (raw as Record<string, unknown>) : {};
  const carrier = unwraps.find((c) => CARRIERS[c].is(o));
  if (carrier === undefined) {
    const shapes = unwraps.map((c) => CARRIERS[c].shape).join(' or ');
    throw refuse(`expected ${shapes} (unwrap: ${unwraps.join(', ')})`);
  }
  return { document: carried(carrier, o), wrapper: raw, carrier };
}

function carried(carrier: PlainUnwrap, o: Record<string, unknown>): unknown {
  if (carrier === 'sns') {
    try {
      return JSON.parse(o.Message as string);
    } catch (error) {
      throw refuse("the SNS notification's Message is not JSON (unwrap: sns)", error);
    }
  }
  if (carrier === 'eventbridge') return o.detail;
  if (o.Event === 's3:TestEvent') {
    throw refuse('an S3 test event (s3:TestEvent), sent when the notification was set up: no job');
  }
  const records = o.Records as unknown[];
  if (records.length !== 1) {
    throw refuse(
      `the S3 notification holds ${records.length} records; leaseq runs one job per message (unwrap: s3)`,
    );
  }
  return records[0];
}

const S3_BUCKET = compileBodyPath('s3.bucket.name');
const S3_OBJECT = compileBodyPath('s3.object.key');
const S3_SEQUENCER = compileBodyPath('s3.object.sequencer');

/**
 * The default key of a carried body: an S3 object event's, an EventBridge event's id. An object key (up
 * to 1024 bytes, URL-encoded in the notification) too long for a dedup key is named by its SHA-256 after
 * a `#`, which the URL-encoded key itself never holds: every valid object event is one job.
 */
export function defaultKey(
  document: unknown,
  { carrier, wrapper }: { readonly carrier?: PlainUnwrap; readonly wrapper: unknown },
): unknown {
  if (carrier === 'eventbridge') return (wrapper as { id?: unknown }).id;
  const [b, k, s] = [S3_BUCKET.read(document), S3_OBJECT.read(document), S3_SEQUENCER.read(document)];
  if (typeof b !== 'string' || typeof k !== 'string' || typeof s !== 'string') return undefined;
  const key = `s3:${b}/${k}@${s}`;
  if (isEnvelopeDedupKey(key)) return key;
  return `s3:${b}/#${createHash('sha256').update(k).digest('base64url')}@${s}`;
}

/** The carrier's own id (SNS MessageId, EventBridge id), kept as the envelope id; else the SQS message's. */
export function carrierId(carrier: PlainUnwrap | undefined, wrapper: unknown): string | undefined {
  if (carrier !== 'sns' && carrier !== 'eventbridge') return undefined;
  const id = (wrapper as Record<string, unknown>)[carrier === 'sns' ? 'MessageId' : 'id'];
  return typeof id === 'string' ? id : undefined;
}
