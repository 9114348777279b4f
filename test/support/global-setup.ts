import { randomBytes } from 'node:crypto';
import { DeleteTableCommand, paginateListTables } from '@aws-sdk/client-dynamodb';
import { DeleteQueueCommand, paginateListQueues } from '@aws-sdk/client-sqs';
import type { TestProject } from 'vitest/node';
import {
  type AwsService,
  awsConfigFromEnv,
  createAwsClients,
  destroyAwsClients,
  SERVICE_ENDPOINT_VARIABLES,
  serviceEndpointsFromEnv,
} from '../../shared/aws/clients.ts';
import { acquireEmulator } from '../../shared/local/emulator.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Endpoint for every AWS client in integration tests but those `endpoints` names. */
    endpoint: string;
    /** Each service's own endpoint (`AWS_ENDPOINT_URL_SQS`, ...), over `endpoint` for that service. */
    endpoints: Partial<Record<AwsService, string>>;
    /** What answers there: `ministack 1.5.33`, or `external` for AWS_ENDPOINT_URL. */
    emulator: string;
    /** Part of every name `uniqueName` makes in this run, so the teardown finds and removes them. */
    runTag: string;
  }
}

/**
 * Global setup of the integration project: uses AWS_ENDPOINT_URL when it is set (LocalStack, any
 * emulator), else the embedded emulator (installed on first use, reused when already running). A
 * service's own endpoint variable (`AWS_ENDPOINT_URL_SQS`, ...) sends that service elsewhere, as the
 * SDK does: `npm run test:localstack` runs SQS on LocalStack and the rest on the embedded emulator. The
 * teardown stops the emulator only if a test session started it, and only when the last of the
 * sessions sharing it (concurrent `vitest` runs in this checkout) is done; one started with
 * `leaseq local up` (as .ci/run does) keeps running.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const previous = process.env.AWS_ENDPOINT_URL;
  // Every service: the deploy tests deploy stacks and run functions on it.
  const handle = await acquireEmulator({
    log: (line) => process.stderr.write(`[leaseq] ${line}\n`),
    services: 'all',
  });
  project.provide('endpoint', handle.endpoint);
  const endpoints = serviceEndpointsFromEnv(process.env);
  project.provide('endpoints', endpoints);
  for (const [service, endpoint] of Object.entries(endpoints)) {
    const variable = SERVICE_ENDPOINT_VARIABLES[service as AwsService];
    process.stderr.write(`[leaseq] ${service}: ${endpoint} (${variable}); the rest: ${handle.endpoint}\n`);
  }
  const runTag = `t${randomBytes(3).toString('hex')}`;
  project.provide('runTag', runTag);
  project.provide(
    'emulator',
    handle.mode === 'external' ? 'external' : `${handle.emulator} ${handle.version}`,
  );
  // Workers are forked after global setup, so code under test that reads the environment finds it too.
  process.env.AWS_ENDPOINT_URL = handle.endpoint;
  // The SDK's notice about its future Node 22 requirement would repeat in every worker's output.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

  return async () => {
    await removeRunResources(handle.endpoint, runTag);
    if (previous === undefined) delete process.env.AWS_ENDPOINT_URL;
    else process.env.AWS_ENDPOINT_URL = previous;
    await handle.release();
  };
}

/**
 * Deletes the queues and tables this run created (their names carry `-<runTag>`), so `npm test` leaves
 * a shared emulator (or LocalStack) as it found it.
 */
async function removeRunResources(endpoint: string, runTag: string): Promise<void> {
  const clients = createAwsClients({ ...awsConfigFromEnv(process.env), endpoint });
  const mine = (name: string) => name.includes(`-${runTag}`);
  try {
    const queues: string[] = [];
    for await (const page of paginateListQueues({ client: clients.sqs }, {})) {
      queues.push(...(page.QueueUrls ?? []).filter((url) => mine(url.slice(url.lastIndexOf('/') + 1))));
    }
    const tables: string[] = [];
    for await (const page of paginateListTables({ client: clients.ddb }, {})) {
      tables.push(...(page.TableNames ?? []).filter(mine));
    }
    await Promise.all([
      ...queues.map((QueueUrl) =>
        clients.sqs.send(new DeleteQueueCommand({ QueueUrl })).catch(() => undefined),
      ),
      ...tables.map((TableName) =>
        clients.ddb.send(new DeleteTableCommand({ TableName })).catch(() => undefined),
      ),
    ]);
    process.stderr.write(
      `[leaseq] removed ${queues.length} queues and ${tables.length} tables this run created\n`,
    );
  } catch (error) {
    process.stderr.write(`[leaseq] could not remove this run's queues and tables: ${String(error)}\n`);
  } finally {
    destroyAwsClients(clients);
  }
}
