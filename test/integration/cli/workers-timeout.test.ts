import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDbJobStore } from '../../../shared/core/adapters/dynamodb-job-store.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { type CoreEnv, coreEnv, sendJob } from '../../support/core-fixture.ts';
import { testEndpoint, uniqueName } from '../../support/env.ts';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
let env: CoreEnv;
let prefix: string;

beforeAll(async () => {
  env = await coreEnv('wtimeout');
  prefix = env.jobsTable.replace(/-jobs$/, '');
});
afterAll(() => env?.close());

describe('Command: leaseq workers --timeout', () => {
  it('bounds a batch as the Lambda timeout does: a job running past it is given back with DeadlineError', async () => {
    // Prepare: a ledger job that works 8 s (a test hook), under workers whose invocations last 5 s;
    // every lease ends 3 s before that (LEASEQ_DEADLINE_MARGIN_MS).
    const key = uniqueName('slow');
    await sendJob(env, {
      dedupKey: key,
      type: 'ledger.credit',
      payload: { account: uniqueName('a'), amount: 1, simulate: { sleepMs: 8000 } },
    });
    const workers = spawn(
      process.execPath,
      ['bin/leaseq.mjs', 'workers', '--prefix', prefix, '--count', '1', '--timeout', '5', '--test-hooks'],
      { cwd: ROOT, env: { ...process.env, AWS_ENDPOINT_URL: testEndpoint() }, stdio: 'ignore' },
    );
    const exited = new Promise((resolve) => workers.on('exit', resolve));

    // Act: watch the job item until its first attempt has ended.
    const store = new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable });
    let firstClaimAt: number | undefined;
    let endedAt: number | undefined;
    let item = await store.get(key);
    for (const started = Date.now(); Date.now() - started < 20_000; ) {
      item = await store.get(key);
      if (item?.attempts === 1 && item.status === JobStatus.InProgress) firstClaimAt ??= Date.now();
      if (item?.lastErrorClass) {
        endedAt = Date.now();
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    workers.kill('SIGTERM');
    await exited;

    // Assess: the attempt was given back with DeadlineError about 2 s in, long before the job's 8 s,
    // and the job goes on being retried rather than dead-lettered.
    expect(item?.lastErrorClass).toBe('DeadlineError');
    expect(item?.status).not.toBe(JobStatus.Dead);
    expect(firstClaimAt).toBeDefined();
    expect((endedAt ?? Number.POSITIVE_INFINITY) - (firstClaimAt ?? 0)).toBeLessThan(5000);
  });
});
