// The worker's side of the claim check: a pointer envelope (`payloadRef`) gets its payload from the
// payload store before the payload is checked, claimed or run.
import { createHash } from 'node:crypto';
import { InvalidEnvelopeError, PayloadMissingError } from '../../errors.ts';
import type { JobEnvelope } from '../contract/envelope.ts';
import {
  DEFAULT_MAX_PAYLOAD_BYTES,
  DEFAULT_PAYLOAD_PREFIX,
  isPayloadKey,
  type PayloadStore,
} from '../contract/payload-store.ts';

/**
 * `envelope` with its payload in place: as it is when it carries one, else read from `payloads`.
 * @throws InvalidEnvelopeError (dead-lettered, never retried) when the object is gone, the worker has no
 * payload store or one of another bucket, or the object is not JSON; any other error of the store (an
 * outage, throttling, a missing permission) as thrown: the message is given back and tried again.
 */
export async function withPayload(
  envelope: JobEnvelope,
  payloads: PayloadStore | undefined,
): Promise<JobEnvelope> {
  const ref = envelope.payloadRef;
  if (ref === undefined) return envelope;
  const where = `s3://${ref.bucket}/${ref.key}`;
  if (payloads === undefined || payloads.bucket !== ref.bucket) {
    throw new InvalidEnvelopeError(
      'payload-missing',
      payloads === undefined
        ? `the payload is in ${where}, and this worker has no payload bucket (LEASEQ_PAYLOAD_BUCKET; construct prop largePayloads)`
        : `the payload is in ${where}, and this worker reads payloads from bucket ${payloads.bucket} only`,
    );
  }
  const prefix = payloads.keyPrefix ?? DEFAULT_PAYLOAD_PREFIX;
  if (!isPayloadKey(ref.key, prefix)) {
    throw new InvalidEnvelopeError(
      'bad-schema',
      `payloadRef.key is not a key the producer writes (${prefix}<yyyy-mm-dd>/<uuid>.json): not followed`,
    );
  }
  const maxBytes = payloads.maxBytes ?? DEFAULT_MAX_PAYLOAD_BYTES;
  if (ref.bytes > maxBytes) {
    throw new InvalidEnvelopeError(
      'too-large',
      `the payload in ${where} is ${ref.bytes} bytes, above the ${maxBytes} byte limit of large payloads (largePayloads.maxBytes)`,
    );
  }
  let text: string;
  try {
    text = await payloads.get(ref);
  } catch (error) {
    if (error instanceof PayloadMissingError)
      throw new InvalidEnvelopeError('payload-missing', error.message, error);
    throw error;
  }
  // Again on the text: a store that could not tell the size before reading (no ContentLength) is held to it.
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes !== ref.bytes) {
    throw new InvalidEnvelopeError(
      'too-large',
      `the payload in ${where} is ${bytes} bytes, the pointer says ${ref.bytes}`,
    );
  }
  if (createHash('sha256').update(text, 'utf8').digest('hex') !== ref.sha256) {
    throw new InvalidEnvelopeError(
      'payload-changed',
      `the payload in ${where} is not the one sent: its sha256 differs from the pointer's (written over after the send)`,
    );
  }
  let payload: unknown;
  try {
    payload = JSON.parse(text);
  } catch (error) {
    throw new InvalidEnvelopeError('not-json', `the payload in ${where} is not JSON`, error);
  }
  const { payloadRef: _ref, ...rest } = envelope;
  return { ...rest, payload };
}
