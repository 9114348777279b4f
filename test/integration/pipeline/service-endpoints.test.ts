import { mkdtempSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AwsService } from '../../../shared/aws/clients.ts';
import { WorkerPool } from '../../../shared/runner/worker-pool.ts';
import { workerEnv } from '../../../shared/worker/config.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  getBalance,
  putBalance,
  sendJob,
} from '../../support/core-fixture.ts';
import { testCredentials, testEndpoint, testEndpointOf, uniqueName } from '../../support/env.ts';
import { leaseq } from '../cli/run-cli.ts';

const LEDGER_JOB_MODULE = fileURLToPath(new URL('../../../examples/ledger/jobs.ts', import.meta.url));

/**
 * An HTTP relay to `target` that notes each request's operation (`AmazonSQS.ReceiveMessage`,
 * `DynamoDB_20120810.UpdateItem`): the headers go on unchanged, so the signature still holds there.
 */
async function recordingRelay(
  target: string,
): Promise<{ endpoint: string; operations: string[]; server: Server }> {
  const operations: string[] = [];
  const to = new URL(target);
  const server = createServer((req, res) => {
    operations.push(String(req.headers['x-amz-target'] ?? `${req.method} ${req.url}`));
    const upstream = request(
      { host: to.hostname, port: to.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.once('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, operations, server };
}

let env: CoreEnv;
let pool: WorkerPool | undefined;
let relay: Awaited<ReturnType<typeof recordingRelay>> | undefined;

beforeAll(async () => {
  env = await coreEnv('svcend');
});
afterEach(async () => {
  await pool?.stop(5000);
  pool = undefined;
  relay?.server.close();
  relay = undefined;
});
afterAll(() => env?.close());

/** Runs one worker process with `service` sent through a relay (its own variable) and one credit job. */
async function creditThroughRelay(service: AwsService, variable: string): Promise<string[]> {
  relay = await recordingRelay(testEndpointOf(service));
  const credential = testCredentials();
  const account = uniqueName('acct');
  await putBalance(env, account, 100, 1);
  pool = new WorkerPool({
    count: 1,
    logDir: mkdtempSync(join(tmpdir(), 'leaseq-workers-')),
    idPrefix: `${uniqueName('p')}-`,
    jobsModule: LEDGER_JOB_MODULE,
    env: {
      AWS_ENDPOINT_URL: testEndpoint(),
      [variable]: relay.endpoint,
      // The relay is not the emulator: clients for it sign with the environment's keys.
      AWS_ACCESS_KEY_ID: credential.accessKeyId,
      AWS_SECRET_ACCESS_KEY: credential.secretAccessKey,
      ...workerEnv({
        queueUrl: env.queueUrl,
        dlqUrl: env.dlqUrl,
        jobsTable: env.jobsTable,
        leasesTable: env.leasesTable,
        tables: { ledger: env.ledgerTable },
        leaseMs: 3000,
        maxAttempts: 3,
      }),
    },
  });
  await pool.start();
  await sendJob(env, { dedupKey: uniqueName('k'), type: 'ledger.credit', payload: { account, amount: 5 } });

  const credited = await eventually(
    async () => (await getBalance(env, account))?.balance === 105,
    60_000,
    300,
  );

  expect(credited).toBe(true);
  return relay.operations;
}

describe('a worker with one service on an endpoint of its own (AWS_ENDPOINT_URL_<SERVICE>)', () => {
  it('sends SQS to AWS_ENDPOINT_URL_SQS and DynamoDB to AWS_ENDPOINT_URL', async () => {
    const operations = await creditThroughRelay('sqs', 'AWS_ENDPOINT_URL_SQS');

    expect(operations).toContain('AmazonSQS.ReceiveMessage');
    // The delete follows the commit the balance shows: wait for it.
    const deleted = () => operations.some((op) => op.startsWith('AmazonSQS.DeleteMessage'));
    expect(await eventually(async () => deleted(), 15_000, 100)).toBe(true);
    expect(operations.filter((op) => !op.startsWith('AmazonSQS.'))).toEqual([]);
  });

  it('sends DynamoDB to AWS_ENDPOINT_URL_DYNAMODB and SQS to AWS_ENDPOINT_URL', async () => {
    const operations = await creditThroughRelay('dynamodb', 'AWS_ENDPOINT_URL_DYNAMODB');

    expect(operations.some((op) => op.startsWith('DynamoDB_20120810.'))).toBe(true);
    expect(operations.filter((op) => !op.startsWith('DynamoDB_20120810.'))).toEqual([]);
  });
});

describe('leaseq status with SQS on an endpoint of its own', () => {
  it('prints which endpoint each service uses, one line each, and reads the queue there', async () => {
    relay = await recordingRelay(testEndpointOf('sqs'));
    const credential = testCredentials();
    // resourceNames(prefix) names the jobs table `<prefix>-jobs`.
    const prefix = env.jobsTable.replace(/-jobs$/, '');

    const run = await leaseq(['status', '--prefix', prefix, '--json'], {
      AWS_ENDPOINT_URL_SQS: relay.endpoint,
      AWS_ACCESS_KEY_ID: credential.accessKeyId,
      AWS_SECRET_ACCESS_KEY: credential.secretAccessKey,
    });

    expect(run.code, run.stderr).toBe(0);
    const lines = run.stderr.split('\n');
    expect(lines).toContain(`leaseq: sqs:      ${relay.endpoint} (AWS_ENDPOINT_URL_SQS)`);
    expect(lines).toContain(`leaseq: dynamodb: ${testEndpoint()} (the target)`);
    expect(relay.operations).toContain('AmazonSQS.GetQueueAttributes');
  });
});
