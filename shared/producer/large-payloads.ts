// The producer's side of the claim check: a job whose body would be over the limit has its payload put
// into the construct's bucket, and a pointer envelope (`payloadRef`) is sent in its place.
import { randomUUID } from 'node:crypto';
import type { S3Client } from '@aws-sdk/client-s3';
import { awsConfigFromEnv } from '../aws/clients.ts';
import { S3PayloadStore } from '../core/adapters/s3-payload-store.ts';
import { bodySizeProblem, claimCheckedEnvelope, type JobEnvelope } from '../core/contract/envelope.ts';
import {
  DEFAULT_MAX_PAYLOAD_BYTES,
  DEFAULT_PAYLOAD_PREFIX,
  type PayloadStore,
} from '../core/contract/payload-store.ts';

/** The claim check of a {@link JobProducer} (option `largePayloads`). */
export interface LargePayloadsOptions {
  /** The construct's bucket (`largePayloads: true`, stack output `PayloadBucketName`). */
  readonly bucket: string;
  /** @default an S3Client from the environment (AWS_REGION, AWS_ENDPOINT_URL), loaded on the first large job */
  readonly client?: S3Client;
  /** Start of every object key; the rest is `<yyyy-mm-dd>/<random UUID>.json`. @default 'payloads/' */
  readonly keyPrefix?: string;
  /** The largest payload put (the worker's `largePayloads.maxBytes`: give both the same). @default 64 MiB */
  readonly maxBytes?: number;
}

/** Puts over-limit payloads into the bucket and turns their envelopes into pointers. */
export class ClaimCheck {
  readonly #store: PayloadStore;
  readonly #prefix: string;
  readonly #maxBytes: number;

  constructor(
    options:
      | LargePayloadsOptions
      | { readonly store: PayloadStore; readonly keyPrefix?: string; readonly maxBytes?: number },
  ) {
    this.#store =
      'store' in options
        ? options.store
        : new S3PayloadStore({
            bucket: options.bucket,
            config: awsConfigFromEnv(),
            ...(options.client ? { client: options.client } : {}),
          });
    this.#prefix = options.keyPrefix ?? DEFAULT_PAYLOAD_PREFIX;
    this.#maxBytes = options.maxBytes ?? DEFAULT_MAX_PAYLOAD_BYTES;
  }

  /**
   * Each envelope as it is sent: unchanged when its body is within `maxBytes`, else the pointer to its
   * payload, put into the bucket first. A put that fails rejects that envelope only.
   */
  apply(
    envelopes: readonly JobEnvelope[],
    maxBytes: number | undefined,
  ): Promise<PromiseSettledResult<JobEnvelope>[]> {
    return Promise.allSettled(
      envelopes.map(async (envelope) => {
        if (!bodySizeProblem(JSON.stringify(envelope), maxBytes)) return envelope;
        const key = `${this.#prefix}${envelope.createdAt.slice(0, 10)}/${randomUUID()}.json`;
        const text = JSON.stringify(envelope.payload ?? null);
        const bytes = Buffer.byteLength(text, 'utf8');
        if (bytes > this.#maxBytes)
          throw new Error(
            `payload is ${bytes} bytes, above the ${this.#maxBytes} byte limit of large payloads (largePayloads.maxBytes)`,
          );
        const ref = await this.#store.put(key, text);
        const pointer = claimCheckedEnvelope(envelope, ref);
        const tooLarge = bodySizeProblem(JSON.stringify(pointer), maxBytes);
        if (tooLarge) throw new Error(`even the claim check's pointer is too large: ${tooLarge}`);
        return pointer;
      }),
    );
  }
}
