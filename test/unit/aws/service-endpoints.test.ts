import { describe, expect, it } from 'vitest';
import { awsConfigFromEnv, createAwsClients, destroyAwsClients } from '../../../shared/aws/clients.ts';

/** The endpoint a client of leaseq's sends to, as the SDK resolves it (no request is sent). */
async function endpointOf(client: {
  config: { endpoint?: () => Promise<{ hostname: string; port?: number }> };
}) {
  const resolved = await client.config.endpoint?.();
  return resolved ? `${resolved.hostname}:${resolved.port}` : undefined;
}

async function sqsAndDynamoDb(env: NodeJS.ProcessEnv) {
  const clients = createAwsClients(awsConfigFromEnv(env));
  try {
    return { sqs: await endpointOf(clients.sqs), dynamodb: await endpointOf(clients.ddb) };
  } finally {
    destroyAwsClients(clients);
  }
}

describe('per-service endpoints (AWS_ENDPOINT_URL_<SERVICE> over AWS_ENDPOINT_URL)', () => {
  it('AWS_ENDPOINT_URL_SQS sends SQS elsewhere and leaves DynamoDB on AWS_ENDPOINT_URL', async () => {
    const env = { AWS_ENDPOINT_URL: 'http://127.0.0.1:4001', AWS_ENDPOINT_URL_SQS: 'http://127.0.0.1:4002' };

    expect(await sqsAndDynamoDb(env)).toEqual({ sqs: '127.0.0.1:4002', dynamodb: '127.0.0.1:4001' });
  });

  it('AWS_ENDPOINT_URL_DYNAMODB sends DynamoDB elsewhere and leaves SQS on AWS_ENDPOINT_URL', async () => {
    const env = {
      AWS_ENDPOINT_URL: 'http://127.0.0.1:4001',
      AWS_ENDPOINT_URL_DYNAMODB: 'http://127.0.0.1:4003',
    };

    expect(await sqsAndDynamoDb(env)).toEqual({ sqs: '127.0.0.1:4001', dynamodb: '127.0.0.1:4003' });
  });

  it('a per-service endpoint wins over an endpoint a composition root sets on the config', async () => {
    const config = {
      ...awsConfigFromEnv({ AWS_ENDPOINT_URL_SQS: 'http://127.0.0.1:4002' }),
      endpoint: 'http://127.0.0.1:4001',
    };
    const clients = createAwsClients(config);

    try {
      expect(await endpointOf(clients.sqs)).toBe('127.0.0.1:4002');
      expect(await endpointOf(clients.ddb)).toBe('127.0.0.1:4001');
    } finally {
      destroyAwsClients(clients);
    }
  });

  it('a blank per-service variable is not an endpoint', async () => {
    const env = { AWS_ENDPOINT_URL: 'http://127.0.0.1:4001', AWS_ENDPOINT_URL_SQS: '  ' };

    expect(await sqsAndDynamoDb(env)).toEqual({ sqs: '127.0.0.1:4001', dynamodb: '127.0.0.1:4001' });
  });

  it('reads the SDK names of the other services too (S3, STS, Lambda, CloudFormation, CloudWatch, Logs)', () => {
    const config = awsConfigFromEnv({
      AWS_ENDPOINT_URL_S3: 'http://127.0.0.1:1',
      AWS_ENDPOINT_URL_STS: 'http://127.0.0.1:2',
      AWS_ENDPOINT_URL_LAMBDA: 'http://127.0.0.1:3',
      AWS_ENDPOINT_URL_CLOUDFORMATION: 'http://127.0.0.1:4',
      AWS_ENDPOINT_URL_CLOUDWATCH: 'http://127.0.0.1:5',
      AWS_ENDPOINT_URL_CLOUDWATCH_LOGS: 'http://127.0.0.1:6',
    });

    expect(config.endpoints).toEqual({
      s3: 'http://127.0.0.1:1',
      sts: 'http://127.0.0.1:2',
      lambda: 'http://127.0.0.1:3',
      cloudformation: 'http://127.0.0.1:4',
      cloudwatch: 'http://127.0.0.1:5',
      logs: 'http://127.0.0.1:6',
    });
    expect(config.endpoint).toBeUndefined();
  });
});
