/**
 * A payload (or a result) as the inspector shows it on request: indented JSON, passed through the
 * deployment's redaction hook first, with its size; a claim-checked payload (the envelope's `payloadRef`)
 * is read from its S3 object, checked as a worker checks it (payload-ref.ts). Nothing here logs.
 */
import { parseEnvelope, SQS_MAX_MESSAGE_BYTES } from '../core/contract/envelope.ts';
import type { PayloadRef, PayloadStore } from '../core/contract/payload-store.ts';
import { type PlainBodyReader, readJobBody } from '../core/contract/plain-body.ts';
import { withPayload } from '../core/pipeline/payload-ref.ts';
import { messageOf } from './ops-errors.ts';

/**
 * The deployment's redaction of text shown to the operator: the same function as the worker's
 * `redactError` (docs/security.md), applied to the whole indented JSON text. It should not throw.
 */
export type RedactText = (text: string) => string;

/** What the page shows when the hook throws or returns no string. */
export const REDACT_THREW = '[withheld: the redaction hook threw]';

export interface ShownValue {
  /** Indented JSON, redacted. */
  readonly text: string;
  /** Bytes of the value as stored or sent (its compact JSON, UTF-8): before redaction. */
  readonly bytes: number;
  /** The hook changed the text: what is shown is not the value (an edit must not start from it). */
  readonly redacted: boolean;
}

export interface ShownPayload extends ShownValue {
  /** `inline`: in the message body; `s3`: the claim check's object, read (`ref` names it). */
  readonly source: 'inline' | 's3';
  readonly ref?: PayloadRef;
  /** The payload itself, unredacted: what an edit starts from when `redacted` is false. */
  readonly value: unknown;
}

/** Pure: `text` through the hook (none: as it is); a hook that throws or returns no string withholds it. */
export function redactText(text: string, redact: RedactText | undefined): string {
  if (!redact) return text;
  try {
    const out: unknown = redact(text);
    return typeof out === 'string' ? out : REDACT_THREW;
  } catch {
    return REDACT_THREW;
  }
}

/** Pure: `value` as the page shows it. */
export function showValue(value: unknown, redact: RedactText | undefined): ShownValue {
  const compact = JSON.stringify(value) ?? 'undefined';
  const pretty = JSON.stringify(value, null, 2) ?? 'undefined';
  const text = redactText(pretty, redact);
  return { text, bytes: Buffer.byteLength(compact, 'utf8'), redacted: text !== pretty };
}

/**
 * The payload of a message body (a dead letter's). A pointer's object is read from `store` when it is
 * of the pointer's bucket; otherwise, and when the body is no envelope, `problem` says why there is none
 * (one line, no body text) and `ref` names the object when there is one.
 */
export async function showLetterPayload(
  body: string,
  options: {
    readonly redact?: RedactText;
    readonly store?: PayloadStore;
    /** The job module's plain bodies: a letter of a plain body shows the payload the worker read from it. */
    readonly plain?: PlainBodyReader;
  } = {},
): Promise<ShownPayload | { readonly problem: string; readonly ref?: PayloadRef }> {
  let envelope: ReturnType<typeof parseEnvelope>;
  try {
    envelope = options.plain
      ? readJobBody(
          body,
          { maxBytes: SQS_MAX_MESSAGE_BYTES, isKnownType: () => true, plain: options.plain },
          { messageId: '' },
        )
      : parseEnvelope(body, { maxBytes: SQS_MAX_MESSAGE_BYTES });
  } catch (error) {
    return { problem: `the body is not a leaseq envelope (${messageOf(error)})` };
  }
  const ref = envelope.payloadRef;
  if (ref === undefined) {
    return { ...showValue(envelope.payload, options.redact), source: 'inline', value: envelope.payload };
  }
  if (!options.store) {
    return {
      problem: `the payload was offloaded to s3://${ref.bucket}/${ref.key} (${ref.bytes} bytes): start leaseq ui with --payload-bucket ${ref.bucket} to show it`,
      ref,
    };
  }
  try {
    const full = await withPayload(envelope, options.store);
    const shown = showValue(full.payload, options.redact);
    return { ...shown, bytes: ref.bytes, source: 's3', ref, value: full.payload };
  } catch (error) {
    return { problem: `the offloaded payload could not be read (${messageOf(error)})`, ref };
  }
}
