// The claim check's store on S3. @aws-sdk/client-s3 is imported on first use only: a worker or producer
// without large payloads never loads it (the Lambda's cold start does not pay for it).
import type { S3Client } from '@aws-sdk/client-s3';
import { type AwsConfig, isLocalEndpoint } from '../../aws/clients.ts';
import { PayloadMissingError } from '../../errors.ts';
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
}

/** {@link PayloadStore} on one S3 bucket: PutObject, GetObject; nothing is deleted (the lifecycle rule expires objects). */
export class S3PayloadStore implements PayloadStore {
  readonly bucket: string;
  readonly #given: S3Client | undefined;
  readonly #config: AwsConfig;
  #loaded: Promise<{ s3: S3Module; client: S3Client }> | undefined;

  constructor(options: S3PayloadStoreOptions) {
    this.bucket = options.bucket;
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
      }),
    );
    return { bucket: this.bucket, key, bytes: Buffer.byteLength(text, 'utf8') };
  }

  async get(ref: PayloadRef): Promise<string> {
    const { s3, client } = await this.#load();
    try {
      const out = await client.send(new s3.GetObjectCommand({ Bucket: ref.bucket, Key: ref.key }));
      if (!out.Body)
        throw new PayloadMissingError(`payload object s3://${ref.bucket}/${ref.key} has no body`);
      return await out.Body.transformToString('utf-8');
    } catch (error) {
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
  const local = isLocalEndpoint(config.endpoint);
  return new s3.S3Client({
    region: config.region,
    maxAttempts: config.maxAttempts ?? 3,
    ...(config.endpoint ? { endpoint: config.endpoint, forcePathStyle: true } : {}),
    // An emulator accepts any credentials; real AWS uses the default provider chain.
    ...(local && !process.env.AWS_ACCESS_KEY_ID
      ? { credentials: { accessKeyId: 'test', secretAccessKey: 'test' } }
      : {}),
  });
}
