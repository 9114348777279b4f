import type { S3Client } from '@aws-sdk/client-s3';
import { S3ServiceException } from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import { S3PayloadStore } from '../../../../shared/core/adapters/s3-payload-store.ts';
import { InvalidEnvelopeError, PayloadMissingError } from '../../../../shared/errors.ts';

/** A client whose every call fails as S3 does with `name` and `status`. */
function failingClient(name: string, status: number): S3Client {
  return {
    send: async () => {
      throw new S3ServiceException({
        name,
        $fault: 'client',
        $metadata: { httpStatusCode: status },
        message: name,
      });
    },
  } as unknown as S3Client;
}

describe('Adapter: S3PayloadStore.get errors', () => {
  it('takes 404 NoSuchKey for a missing payload', async () => {
    const store = new S3PayloadStore({ bucket: 'b-payloads', client: failingClient('NoSuchKey', 404) });
    await expect(
      store.get({ bucket: 'b-payloads', key: 'payloads/gone.json', bytes: 10, sha256: '0'.repeat(64) }),
    ).rejects.toBeInstanceOf(PayloadMissingError);
  });

  it('throws 403 AccessDenied as it is (retried): a missing permission is not a missing payload', async () => {
    // The construct grants s3:ListBucket under the prefix so that S3 answers a missing key 404, not 403
    // (test/infra/leaseq-pipeline.test.ts); a 403 left is a real permission problem an operator fixes.
    const store = new S3PayloadStore({ bucket: 'b-payloads', client: failingClient('AccessDenied', 403) });
    const error = await store
      .get({ bucket: 'b-payloads', key: 'payloads/x.json', bytes: 10, sha256: '0'.repeat(64) })
      .catch((e) => e);
    expect(error).not.toBeInstanceOf(PayloadMissingError);
    expect(error.name).toBe('AccessDenied');
  });
});

describe('Adapter: S3PayloadStore.get size', () => {
  it('refuses an object whose ContentLength is not the pointer’s bytes without reading its body', async () => {
    let read = false;
    let destroyed = false;
    const client = {
      send: async () => ({
        ContentLength: 5_000_000,
        Body: {
          transformToString: async () => {
            read = true;
            return '';
          },
          destroy: () => {
            destroyed = true;
          },
        },
      }),
    } as unknown as S3Client;
    const store = new S3PayloadStore({ bucket: 'b-payloads', client });
    const error = await store
      .get({ bucket: 'b-payloads', key: 'payloads/x.json', bytes: 12, sha256: '0'.repeat(64) })
      .catch((e) => e);
    expect(error).toBeInstanceOf(InvalidEnvelopeError);
    expect(error.problem).toBe('too-large');
    expect(read).toBe(false);
    expect(destroyed).toBe(true);
  });
});
