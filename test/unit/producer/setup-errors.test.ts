import { mkdtempSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SQSClient } from '@aws-sdk/client-sqs';
import { fromEnv } from '@aws-sdk/credential-provider-env';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { localJobProducer } from '../../../shared/local/local-producer.ts';
import { JobProducer, SendJobsError } from '../../../shared/producer/job-producer.ts';

const job = { type: 'email.send', dedupKey: 'welcome-1', payload: { to: 'a@b.co' } };

async function sendError(client: SQSClient, queueUrl: string): Promise<SendJobsError> {
  const error = await new JobProducer({ queueUrl, client }).send(job).catch((e: unknown) => e);
  client.destroy();
  expect(error).toBeInstanceOf(SendJobsError);
  return error as SendJobsError;
}

afterEach(() => vi.unstubAllEnvs());

describe('JobProducer: setup errors say what to set', () => {
  it('missing credentials (the SDK its CredentialsProviderError): names the variables, stays retryable', async () => {
    // Arrange: the SDK's own environment provider with no keys in the environment.
    vi.stubEnv('AWS_ACCESS_KEY_ID', '');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', '');
    const client = new SQSClient({ region: 'us-east-1', credentials: fromEnv(), maxAttempts: 1 });

    // Act
    const error = await sendError(client, 'https://sqs.us-east-1.amazonaws.com/123456789012/jobs');

    // Assert: retryable, as the same error is what a briefly unavailable credentials service gives.
    expect(error.retryable).toBe(true);
    expect(error.message).not.toContain('\n');
    expect(error.message).toMatch(/CredentialsProviderError/);
    expect(error.message).toMatch(/set AWS_PROFILE or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY/);
    expect(error.result.failed[0]?.code).toBe('CredentialsProviderError');
  });

  it('a host that does not resolve (getaddrinfo ENOTFOUND): names the host and AWS_ENDPOINT_URL, retryable false', async () => {
    // Arrange: `.invalid` never resolves (RFC 2606), so this fails in DNS on any machine.
    const client = new SQSClient({
      region: 'us-east-1',
      endpoint: 'http://sqs.leaseq-test.invalid',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      maxAttempts: 1,
    });

    // Act
    const error = await sendError(client, 'http://sqs.leaseq-test.invalid/000000000000/jobs');

    // Assert
    expect(error.retryable).toBe(false);
    expect(error.message).not.toContain('\n');
    expect(error.message).toMatch(/sqs\.leaseq-test\.invalid does not resolve/);
    expect(error.message).toMatch(/set AWS_ENDPOINT_URL/);
    expect(error.result.failed[0]?.code).toBe('ENOTFOUND');
  });

  it('a refusal by SQS itself stays retryable (the next attempt may pass)', async () => {
    // Arrange: a client whose call fails the way a throttled or unavailable SQS does.
    const client = new SQSClient({ region: 'us-east-1' });
    client.send = (async () => {
      throw Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' });
    }) as unknown as SQSClient['send'];

    // Act
    const error = await sendError(client, 'https://sqs.us-east-1.amazonaws.com/123456789012/jobs');

    // Assert
    expect(error.retryable).toBe(true);
    expect(error.message).toMatch(/ThrottlingException: Rate exceeded/);
  });
});

describe('localJobProducer: without a local emulator', () => {
  it('says what to run, not retryable, before sending anything', async () => {
    // Arrange: a state directory with no emulator recorded, and no AWS_ENDPOINT_URL.
    const env = { LEASEQ_STATE_DIR: mkdtempSync(join(tmpdir(), 'leaseq-no-emulator-')) };

    // Act
    const error = await localJobProducer({ env }).catch((e: unknown) => e);

    // Assert
    expect(error).toMatchObject({ retryable: false });
    expect((error as Error).message).toMatch(
      /no local emulator is running .*`npx leaseq local up`.*AWS_ENDPOINT_URL/,
    );
  });
});

/** A local HTTP server answering every request with `status`; records what it was asked. */
async function answering(status: number) {
  const seen: IncomingMessage[] = [];
  const server = createServer((request, response) => {
    seen.push(request);
    response.statusCode = status;
    response.end(status === 503 ? 'busy' : '{}');
  }).listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, seen, close: () => server.close() };
}

describe('JobProducer: what a setup error is not', () => {
  it('an instance metadata service answering 503 leaves the send retryable (the next try may find credentials)', async () => {
    // Arrange: no credentials anywhere but the metadata service, which is busy.
    const imds = await answering(503);
    for (const name of [
      'AWS_ACCESS_KEY_ID',
      'AWS_SECRET_ACCESS_KEY',
      'AWS_SESSION_TOKEN',
      'AWS_PROFILE',
      'AWS_ENDPOINT_URL',
      'AWS_CONTAINER_CREDENTIALS_FULL_URI',
      'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI',
      'AWS_WEB_IDENTITY_TOKEN_FILE',
    ])
      vi.stubEnv(name, undefined as never);
    vi.stubEnv('AWS_CONFIG_FILE', '/nonexistent');
    vi.stubEnv('AWS_SHARED_CREDENTIALS_FILE', '/nonexistent');
    vi.stubEnv('AWS_EC2_METADATA_SERVICE_ENDPOINT', imds.url);

    // Act
    const error = await new JobProducer({ queueUrl: 'https://sqs.us-east-1.amazonaws.com/123456789012/jobs' })
      .send(job)
      .catch((e: unknown) => e);
    imds.close();

    // Assert: the metadata service was asked, and the failure is one a later try may pass.
    expect(error).toBeInstanceOf(SendJobsError);
    expect(imds.seen.length).toBeGreaterThan(0);
    expect((error as SendJobsError).retryable).toBe(true);
  }, 20_000);

  it('AWS_ENDPOINT_URL_SQS still chooses the endpoint for a loopback queue URL (a docker-compose setup)', async () => {
    // Arrange: the queue URL names a port nothing listens on here; the SQS endpoint variable names the server.
    const sqs = await answering(500);
    vi.stubEnv('AWS_ENDPOINT_URL', undefined as never);
    vi.stubEnv('AWS_ENDPOINT_URL_SQS', sqs.url);
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'test');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'test');

    // Act
    await new JobProducer({ queueUrl: 'http://localhost:9/000000000000/jobs' })
      .send(job)
      .catch(() => undefined);
    sqs.close();

    // Assert
    expect(sqs.seen.length).toBeGreaterThan(0);
  }, 20_000);
});
