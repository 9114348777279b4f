// The claim check's store on S3. @aws-sdk/client-s3 is imported on first use only: a worker or producer
// without large payloads never loads it (the Lambda's cold start does not pay for it).
import { createHash } from 'node:crypto';
import type { S3Client } from '@aws-sdk/client-s3';
import { type AwsConfig, isLocalEndpoint, serviceEndpoint } from '../../aws/clients.ts';
import { localCredentialProvider } from '../../aws/local-credential.ts';
import { InvalidEnvelopeError, PayloadMissingError } from '../../errors.ts';
import type { PayloadRef, PayloadStore } from '../contract/payload-store.ts';

type S3Module = typeof import('@aws-sdk/client-s3');

/** Settings of {@link S3PayloadStore}. */
export interface S3PayloadStoreOptions {
  /** The bucket (the construct's `largePayloads` bucket, stack output `PayloadBucketName`). */
  readonly bucket: string;
  /** @default an S3Client from `config` (path-style addressing on an emulator endpoint) */
  readonly client?: S3Client;
  /** Where the default client connects. @default region us-east-1, real AWS */
  readonly config?: AwsConfig;
  /** Start of the keys pointers may name (the producers' `keyPrefix`). @default 'payloads/' */
  readonly keyPrefix?: string;
  /** The largest payload followed. @default 64 MiB */
  readonly maxBytes?: number;
}

/** {@link PayloadStore} on one S3 bucket: PutObject, GetObject; nothing is deleted (the lifecycle rule expires objects). */
export class S3PayloadStore implements PayloadStore {
  readonly bucket: string;
  readonly keyPrefix: string | undefined;
  readonly maxBytes: number | undefined;
  readonly #given: S3Client | undefined;
  readonly #config: AwsConfig;
  #loaded: Promise<{ s3: S3Module; client: S3Client }> | undefined;

  constructor(options: S3PayloadStoreOptions) {
    this.bucket = options.bucket;
    this.keyPrefix = options.keyPrefix;
    this.maxBytes = options.maxBytes;
    this.#given = options.client;
    this.#config = options.config ?? { region: 'us-east-1' };
  }

  #load(): Promise<{ s3: S3Module; client: S3Client }> {
    this.#loaded ??= import('@aws-sdk/client-s3').then((s3) => ({
      s3,
      client: this.#given ?? newClient(s3, this.#config),
    }));
    return this.#loaded;
  }

  async put(key: string, text: string): Promise<PayloadRef> {
    const { s3, client } = await this.#load();
    await client.send(
      new s3.PutObjectCommand({
        Bucket: this.bucket,
        Key: key,
        Body: text,
        ContentType: 'application/json',
        // Written once: a second put to the same key fails (412) instead of replacing what a pointer names.
        IfNoneMatch: '*',
      }),
    );
    return {
      bucket: this.bucket,
      key,
      bytes: Buffer.byteLength(text, 'utf8'),
      sha256: createHash('sha256').update(text, 'utf8').digest('hex'),
    };
  }

  async get(ref: PayloadRef): Promise<string> {
    const { s3, client } = await this.#load();
    try {
      const out = await client.send(new s3.GetObjectCommand({ Bucket: ref.bucket, Key: ref.key }));
      if (!out.Body)
        throw new PayloadMissingError(`payload object s3://${ref.bucket}/${ref.key} has no body`);
      // The size from the response headers, before the body is read: an object other than the one the
      // pointer names (or a hostile one) is not taken into memory.
      if (out.ContentLength !== undefined && out.ContentLength !== ref.bytes) {
        (out.Body as { destroy?: () => void }).destroy?.();
        throw new InvalidEnvelopeError(
          'too-large',
          `payload object s3://${ref.bucket}/${ref.key} is ${out.ContentLength} bytes, the pointer says ${ref.bytes}`,
        );
      }
      return await out.Body.transformToString('utf-8');
    } catch (error) {
      if (error instanceof InvalidEnvelopeError) throw error;
      // Only a 404 is a missing payload: the construct grants s3:ListBucket under the prefix so S3 answers
      // one for a missing key; a 403 is a permission to fix, given back and retried.
      if (error instanceof s3.NoSuchKey || (error as { name?: string }).name === 'NoSuchKey') {
        throw new PayloadMissingError(
          `payload object s3://${ref.bucket}/${ref.key} does not exist (expired by the bucket's lifecycle rule, or deleted)`,
          error,
        );
      }
      throw error;
    }
  }
}

function newClient(s3: S3Module, config: AwsConfig): S3Client {
  const endpoint = serviceEndpoint(config, 's3');
  return new s3.S3Client({
    region: config.region,
    maxAttempts: config.maxAttempts ?? 3,
    ...(endpoint ? { endpoint, forcePathStyle: true } : {}),
    // The embedded emulator serves only its own credential; real AWS uses the default provider chain.
    ...(config.credentials
      ? { credentials: config.credentials }
      : isLocalEndpoint(endpoint)
        ? { credentials: localCredentialProvider(endpoint as string) }
        : {}),
  });
}
