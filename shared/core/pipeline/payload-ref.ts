// The worker's side of the claim check: a pointer envelope (`payloadRef`) gets its payload from the
// payload store before the payload is checked, claimed or run.
import { InvalidEnvelopeError, PayloadMissingError } from '../../errors.ts';
import type { JobEnvelope } from '../contract/envelope.ts';
import type { PayloadStore } from '../contract/payload-store.ts';

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
  let text: string;
  try {
    text = await payloads.get(ref);
  } catch (error) {
    if (error instanceof PayloadMissingError)
      throw new InvalidEnvelopeError('payload-missing', error.message, error);
    throw error;
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
