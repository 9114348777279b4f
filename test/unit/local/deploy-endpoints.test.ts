import { afterEach, describe, expect, it } from 'vitest';
import { createAwsClients, destroyAwsClients } from '../../../shared/aws/clients.ts';
import { cdkEnv } from '../../../shared/local/deploy-env.ts';

// A deploy acts on the emulator only, and signs with the emulator's per-start credential. A service's own
// endpoint variable in the operator's shell (AWS_ENDPOINT_URL_S3, ...) must neither send part of the
// deploy elsewhere nor take that credential there.

const EMULATOR = 'http://127.0.0.1:4566';
const CREDENTIAL = { accessKeyId: 'LSQEMULATORKEY000001', secretAccessKey: 'emulator-secret' };
const saved = { ...process.env };

afterEach(() => {
  for (const name of Object.keys(process.env)) if (!(name in saved)) delete process.env[name];
  Object.assign(process.env, saved);
});

describe('the deploy path and per-service endpoints', () => {
  it("cdk's environment carries no per-service endpoint of the operator's shell", () => {
    // Prepare: the shell points S3 and SQS elsewhere (real AWS, another emulator).
    process.env.AWS_ENDPOINT_URL_S3 = 'https://s3.us-east-1.amazonaws.com';
    process.env.AWS_ENDPOINT_URL_SQS = 'http://127.0.0.1:4599';

    // Act
    const env = cdkEnv({ endpoint: EMULATOR, region: 'us-east-1', credentials: CREDENTIAL });

    // Assess: the cdk commands sign with the emulator's keys, so every service must go to the emulator.
    expect(env.AWS_ENDPOINT_URL).toBe(EMULATOR);
    expect(env.AWS_ACCESS_KEY_ID).toBe(CREDENTIAL.accessKeyId);
    expect(Object.keys(env).filter((name) => name.startsWith('AWS_ENDPOINT_URL_'))).toEqual([]);
  });

  it("a client on a service's own endpoint never signs with credentials given for the shared one", async () => {
    // Prepare: the emulator's credential for the shared endpoint; SQS on an endpoint of its own.
    const clients = createAwsClients({
      endpoint: EMULATOR,
      endpoints: { sqs: 'https://sqs.us-east-1.amazonaws.com' },
      region: 'us-east-1',
      credentials: CREDENTIAL,
    });
    try {
      // Act
      const sqs = await clients.sqs.config.credentials().catch(() => undefined);
      const ddb = await clients.ddb.config.credentials();

      // Assess: DynamoDB (on the emulator) has it; SQS (elsewhere) does not.
      expect(ddb.accessKeyId).toBe(CREDENTIAL.accessKeyId);
      expect(sqs?.accessKeyId).not.toBe(CREDENTIAL.accessKeyId);
    } finally {
      destroyAwsClients(clients);
    }
  });
});
