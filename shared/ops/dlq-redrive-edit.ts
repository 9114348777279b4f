/**
 * Edit and retry (`dlq redrive --payload-file`): the letter's envelope with the operator's payload in it.
 */
import {
  bodySizeProblem,
  DEFAULT_MAX_BODY_BYTES,
  ENVELOPE_ID,
  isEnvelopeDedupKey,
  isEnvelopeType,
  type JobEnvelope,
  makeEnvelope,
  parseEnvelope,
  SQS_MAX_MESSAGE_BYTES,
} from '../core/contract/envelope.ts';
import { isEnvelopeShaped } from '../core/contract/plain-body.ts';
import { messageOf, OpsError } from './ops-errors.ts';

/**
 * The letter's envelope with its payload replaced by `payload`: id, dedup key, type, createdAt and trace
 * kept (a claim-check pointer is dropped: the payload is inline now). A plain body's letter (one the
 * worker read by its plainBodies, docs/envelope.md "Plain bodies") becomes an envelope of the dedup key and
 * type its reason attributes name: the operator's payload is the job's payload, not the body, and no path
 * or function can be run backwards to put it into the producer's shape. Throws OpsError when the letter
 * is neither, or the new body is above `maxBytes`.
 */
export function editedBody(
  letterBody: string,
  payload: unknown,
  maxBytes = DEFAULT_MAX_BODY_BYTES,
  letter: { readonly dedupKey?: string; readonly type?: string; readonly messageId?: string } = {},
): string {
  let envelope: JobEnvelope;
  try {
    envelope = parseEnvelope(letterBody, { maxBytes: SQS_MAX_MESSAGE_BYTES });
  } catch (error) {
    const plain = plainLetterEnvelope(letterBody, letter);
    if (plain === undefined) {
      throw new OpsError(
        `the dead letter's body is not a leaseq envelope (${messageOf(error)}), and its attributes name no dedup key and type; send the job anew with \`leaseq send\``,
        error,
      );
    }
    envelope = plain;
  }
  const { payloadRef: _pointer, ...rest } = envelope as JobEnvelope & { payloadRef?: unknown };
  const body = JSON.stringify({ ...rest, payload });
  const tooLarge = bodySizeProblem(body, maxBytes);
  if (tooLarge) throw new OpsError(`the corrected job's ${tooLarge}; nothing was sent`);
  return body;
}

/**
 * The envelope of a plain body's letter: a JSON body that is not of the envelope's shape, lettered by a
 * worker that read its key and type (they are in the letter's attributes). Undefined otherwise.
 */
function plainLetterEnvelope(
  body: string,
  letter: { readonly dedupKey?: string; readonly type?: string; readonly messageId?: string },
): JobEnvelope | undefined {
  if (letter.dedupKey === undefined || letter.type === undefined) return undefined;
  if (!isEnvelopeDedupKey(letter.dedupKey) || !isEnvelopeType(letter.type)) return undefined;
  try {
    if (isEnvelopeShaped(JSON.parse(body))) return undefined;
  } catch {
    return undefined;
  }
  const id = letter.messageId && ENVELOPE_ID.test(letter.messageId) ? letter.messageId : letter.dedupKey;
  return makeEnvelope({ id, dedupKey: letter.dedupKey, type: letter.type, payload: undefined });
}
