/**
 * Edit and retry (`dlq redrive --payload-file`): the letter's envelope with the operator's payload in it.
 */
import {
  bodySizeProblem,
  DEFAULT_MAX_BODY_BYTES,
  type JobEnvelope,
  parseEnvelope,
  SQS_MAX_MESSAGE_BYTES,
} from '../core/contract/envelope.ts';
import { messageOf, OpsError } from './ops-errors.ts';

/**
 * The letter's envelope with its payload replaced by `payload`: id, dedup key, type, createdAt and trace
 * kept (a claim-check pointer is dropped: the payload is inline now). Throws OpsError when the letter's body
 * is not an envelope, or the new body is above `maxBytes`.
 */
export function editedBody(letterBody: string, payload: unknown, maxBytes = DEFAULT_MAX_BODY_BYTES): string {
  let envelope: JobEnvelope;
  try {
    envelope = parseEnvelope(letterBody, { maxBytes: SQS_MAX_MESSAGE_BYTES });
  } catch (error) {
    throw new OpsError(
      `the dead letter's body is not a leaseq envelope (${messageOf(error)}); send the job anew with \`leaseq send\``,
      error,
    );
  }
  const { payloadRef: _pointer, ...rest } = envelope as JobEnvelope & { payloadRef?: unknown };
  const body = JSON.stringify({ ...rest, payload });
  const tooLarge = bodySizeProblem(body, maxBytes);
  if (tooLarge) throw new OpsError(`the corrected job's ${tooLarge}; nothing was sent`);
  return body;
}
