// The claim check's port: a payload too large for a message is kept in an object store (S3) and the
// message carries a reference to it (the envelope's `payloadRef`). The adapter is s3-payload-store.ts.

/** Where a claim-checked payload is kept: the envelope's `payloadRef`. */
export interface PayloadRef {
  readonly bucket: string;
  readonly key: string;
  /** Size of the stored payload (its JSON text), for logs and operators. */
  readonly bytes: number;
}

/** A store for payloads over the body limit. */
export interface PayloadStore {
  /** The bucket this store reads and writes; a reference to another bucket is not followed. */
  readonly bucket: string;
  /** Stores a payload's JSON text under `key`; resolves with its reference. */
  put(key: string, text: string): Promise<PayloadRef>;
  /**
   * The payload's JSON text.
   * @throws PayloadMissingError when the object is not there (expired by the lifecycle rule, or deleted);
   * any other error (throttling, an outage, a missing permission) as the SDK threw it.
   */
  get(ref: PayloadRef): Promise<string>;
}
