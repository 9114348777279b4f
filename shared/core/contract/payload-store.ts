// The claim check's port: a payload too large for a message is kept in an object store (S3) and the
// message carries a reference to it (the envelope's `payloadRef`). The adapter is s3-payload-store.ts.

/** Where a claim-checked payload is kept: the envelope's `payloadRef`. */
export interface PayloadRef {
  readonly bucket: string;
  readonly key: string;
  /** Size of the stored payload (its JSON text): the worker reads no object of another size. */
  readonly bytes: number;
  /** SHA-256 of the stored payload's bytes, lower-case hex: an object written over after the send is refused. */
  readonly sha256: string;
}

/** The key prefix of claim-checked payloads unless configured otherwise (`largePayloads.keyPrefix`). */
export const DEFAULT_PAYLOAD_PREFIX = 'payloads/';

/**
 * The largest claim-checked payload unless configured otherwise (`largePayloads.maxBytes`): the producer
 * refuses a larger one, the worker reads none larger (it holds the whole text in memory).
 */
export const DEFAULT_MAX_PAYLOAD_BYTES = 64 * 1024 * 1024;

/**
 * Whether `key` is one the producer writes: `<prefix><yyyy-mm-dd>/<uuid>.json`. A pointer to any other key
 * (another prefix, `..`, another tenant's objects) is not followed.
 */
export function isPayloadKey(key: string, prefix: string): boolean {
  return (
    key.startsWith(prefix) &&
    /^\d{4}-\d{2}-\d{2}\/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.json$/.test(
      key.slice(prefix.length),
    )
  );
}

/** A store for payloads over the body limit. */
export interface PayloadStore {
  /** The bucket this store reads and writes; a reference to another bucket is not followed. */
  readonly bucket: string;
  /** Start of the keys this store's pointers may name. @default DEFAULT_PAYLOAD_PREFIX */
  readonly keyPrefix?: string;
  /** The largest payload read or written. @default DEFAULT_MAX_PAYLOAD_BYTES */
  readonly maxBytes?: number;
  /** Stores a payload's JSON text under `key`; resolves with its reference. */
  put(key: string, text: string): Promise<PayloadRef>;
  /**
   * The payload's JSON text.
   * @throws PayloadMissingError when the object is not there (expired by the lifecycle rule, or deleted);
   * InvalidEnvelopeError `too-large` when the object's size is not `ref.bytes` (its body is not read);
   * any other error (throttling, an outage, a missing permission) as the SDK threw it.
   */
  get(ref: PayloadRef): Promise<string>;
}
