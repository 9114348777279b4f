import { describe, expect, it } from 'vitest';
import { serviceEndpointLines } from '../../../cli/service-endpoints.ts';

describe('the lines that say which endpoint each service uses', () => {
  it('names each service with its endpoint and where it comes from when one has its own', () => {
    const lines = serviceEndpointLines('http://127.0.0.1:4566', {
      AWS_ENDPOINT_URL_SQS: 'http://127.0.0.1:4599',
    });

    expect(lines).toEqual([
      'sqs:      http://127.0.0.1:4599 (AWS_ENDPOINT_URL_SQS)',
      'dynamodb: http://127.0.0.1:4566 (the target)',
    ]);
  });

  it('adds a line for another service with its own endpoint (S3)', () => {
    const lines = serviceEndpointLines(
      'http://127.0.0.1:4566',
      { AWS_ENDPOINT_URL_S3: 'http://127.0.0.1:9000' },
      'the emulator',
    );

    expect(lines).toEqual([
      'sqs:      http://127.0.0.1:4566 (the emulator)',
      'dynamodb: http://127.0.0.1:4566 (the emulator)',
      's3:       http://127.0.0.1:9000 (AWS_ENDPOINT_URL_S3)',
    ]);
  });

  it('prints nothing when no service has an endpoint of its own (the target line says it)', () => {
    expect(
      serviceEndpointLines('http://127.0.0.1:4566', { AWS_ENDPOINT_URL: 'http://127.0.0.1:4566' }),
    ).toEqual([]);
  });
});
