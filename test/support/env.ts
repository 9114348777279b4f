import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import {
  type AwsClients,
  type AwsConfig,
  type AwsService,
  awsConfigFromEnv,
  createAwsClients,
  serviceEndpoint,
} from '../../shared/aws/clients.ts';
import { ANY_CREDENTIAL, type LocalCredential, ownCredentialFor } from '../../shared/aws/local-credential.ts';

/** The endpoint the integration global setup started or found (`AWS_ENDPOINT_URL` wins). */
export function testEndpoint(): string {
  return inject('endpoint');
}

/**
 * The services whose own endpoint variable (`AWS_ENDPOINT_URL_SQS`, ...) sends them elsewhere than
 * `testEndpoint()` (e.g. SQS on LocalStack, the rest on the embedded emulator). Empty by default.
 */
export function testEndpoints(): Partial<Record<AwsService, string>> {
  return inject('endpoints') ?? {};
}

/** Where `service`'s requests go in this run: its own endpoint, else `testEndpoint()`. */
export function testEndpointOf(service: AwsService): string {
  return serviceEndpoint({ endpoint: testEndpoint(), endpoints: testEndpoints() }, service) ?? testEndpoint();
}

/**
 * The client settings of this run (`testEndpoint()` with each service's own endpoint over it), for a
 * test that builds clients with settings of its own: `createAwsClients({ ...testAwsConfig(), maxAttempts: 1 })`.
 */
export function testAwsConfig(): AwsConfig {
  return { ...awsConfigFromEnv(process.env), endpoint: testEndpoint(), endpoints: testEndpoints() };
}

/**
 * The keys the injected endpoint serves: the embedded emulator's credential of this start when the
 * endpoint is that emulator, else `test`/`test` (LocalStack and other emulators take any). For clients
 * leaseq does not build (CloudFormation, Logs, S3 in tests) and for other tools (the AWS CLI).
 */
export function testCredentials(): LocalCredential {
  return ownCredentialFor(testEndpoint()) ?? ANY_CREDENTIAL;
}

/**
 * SQS and DynamoDB clients for the injected endpoint. Call once per file (e.g. in `beforeAll`) and
 * close them with `destroyAwsClients` in `afterAll`.
 */
export function testClients(): AwsClients {
  return createAwsClients(testAwsConfig());
}

let counter = 0;

/** The integration run's tag (`t` + 6 hex digits); unit tests, which have no global setup, use `u`. */
/** This test run's tag (part of every name `uniqueName` makes, so the teardown finds them). */
export function runTag(): string {
  try {
    return inject('runTag') ?? 'u';
  } catch {
    return 'u';
  }
}

/**
 * A name no other test (in this run or a concurrent one) uses: `<prefix>-<runTag><time><counter><random>`,
 * at most 60 characters of [A-Za-z0-9_-], so it is valid as a queue name (with room for `.fifo`) and
 * as a table name.
 */
export function uniqueName(prefix: string): string {
  if (!/^[A-Za-z0-9_-]{1,30}$/.test(prefix)) {
    throw new Error(
      `uniqueName prefix must be 1-30 characters of [A-Za-z0-9_-], got ${JSON.stringify(prefix)}`,
    );
  }
  counter += 1;
  // The run tag lets the global teardown find what this run made; time, counter and randomness keep
  // names of parallel test files apart.
  const suffix = [runTag(), Date.now().toString(36), counter.toString(36), randomBytes(3).toString('hex')];
  return `${prefix}-${suffix.join('')}`;
}
