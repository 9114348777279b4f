import { JobStatus } from '../../shared/core/contract/statuses.ts';
import { toSqsRecord } from '../../shared/runner/sqs-records.ts';
import { type CoreEnv, makeWorker, receiveAll, sendJob } from './core-fixture.ts';
import { uniqueName } from './env.ts';
import { untilIndexed } from './problems-index.ts';
import { testRegistry } from './test-jobs.ts';

/**
 * Sends `count` `test.credit` jobs whose first attempt fails and runs that attempt: each then waits for
 * its retry (RETRY_WAIT), in the problems index (waited for: the index is eventually consistent). Their
 * retries' messages come back after the 1 s backoff and stay while nothing polls the queue.
 */
export async function waitingJobs(env: CoreEnv, label: string, count: number): Promise<string[]> {
  const worker = makeWorker(env, testRegistry(env).registry);
  const keys = Array.from({ length: count }, () => uniqueName(label));
  for (const key of keys) {
    await sendJob(env, {
      dedupKey: key,
      type: 'test.credit',
      payload: { account: uniqueName('a'), amount: 1, failTimes: 1 },
    });
  }
  const left = new Set(keys);
  for (let i = 0; i < 20 && left.size > 0; i++) {
    for (const m of await receiveAll(env, env.queueUrl, 2, 1)) {
      const key = keys.find((k) => m.Body?.includes(`"${k}"`));
      if (!key || !left.has(key)) continue;
      await worker.processor.process(toSqsRecord(m, env.queueArn, env.region));
      left.delete(key);
    }
  }
  if (left.size > 0) throw new Error(`no message for ${[...left].join(', ')}`);
  await untilIndexed(env.clients.doc, env.jobsTable, keys, { status: JobStatus.RetryWait });
  return keys;
}
