/**
 * Counts the AWS requests leaseq makes per job, with SDK middleware (no timing: these machines are
 * noisy). Targets from the core issue: happy path <= 2 DynamoDB writes (claim + commit) plus one per
 * checkpoint; a duplicate of a completed job <= 1, and 0 on a local-cache hit.
 *
 *   npm run bench:core            (embedded emulator, or AWS_ENDPOINT_URL)
 */
import { randomUUID } from 'node:crypto';
import { Logger } from '@aws-lambda-powertools/logger';
import { GetQueueAttributesCommand, SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { z } from 'zod';
import { awsConfigFromEnv, createAwsClients, destroyAwsClients } from '../shared/aws/clients.ts';
import { RequestCounter } from '../shared/aws/request-counter.ts';
import { DynamoDbJobStore } from '../shared/core/adapters/dynamodb-job-store.ts';
import { SqsJobQueue } from '../shared/core/adapters/sqs-job-queue.ts';
import { makeEnvelope } from '../shared/core/contract/envelope.ts';
import { versionedPut } from '../shared/core/decisions/optimistic.ts';
import { JobRegistry } from '../shared/core/model/registry.ts';
import { processBatch } from '../shared/core/pipeline/batch.ts';
import { CompletedCache } from '../shared/core/pipeline/completed-cache.ts';
import { JobProcessor } from '../shared/core/pipeline/processor.ts';
import { ensureEmulator } from '../shared/local/emulator.ts';
import { provisionLocal } from '../shared/local/provision.ts';
import { pollOnce } from '../shared/runner/poll.ts';

const JOBS = Number(process.env.BENCH_JOBS ?? 40);
const DDB_WRITES = ['PutItem', 'UpdateItem', 'DeleteItem', 'TransactWriteItems', 'BatchWriteItem'];

async function main(): Promise<void> {
  const emulator = await ensureEmulator({ log: (line) => process.stderr.write(`${line}\n`) });
  const clients = createAwsClients({ ...awsConfigFromEnv(), endpoint: emulator.endpoint });
  const counter = new RequestCounter().attach(clients);
  // The producer and the drain check use their own, uncounted clients: only the worker's requests count.
  const control = createAwsClients({ ...awsConfigFromEnv(), endpoint: emulator.endpoint });
  const prefix = `bench-${Date.now().toString(36)}`;
  const { outputs, appTables } = await provisionLocal({ clients, prefix });
  const ledgerTable = appTables.ledger ?? '';
  const queueArn =
    (
      await clients.sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: outputs.JobsQueueUrl, AttributeNames: ['QueueArn'] }),
      )
    ).Attributes?.QueueArn ?? '';

  const registry = new JobRegistry()
    .register({
      type: 'bench.credit',
      payload: z.object({ account: z.string(), amount: z.number() }),
      run: async (_ctx, p) => {
        const seen = await clients.doc.send(
          new GetCommand({
            TableName: ledgerTable,
            Key: { account: p.account },
            ConsistentRead: true,
          }),
        );
        const item = seen.Item as { balance: number; version: number } | undefined;
        return {
          effects: [
            versionedPut({
              tableName: ledgerTable,
              key: { account: p.account },
              seenVersion: item?.version,
              item: { balance: (item?.balance ?? 0) + p.amount },
            }),
          ],
        };
      },
    })
    .register({
      type: 'bench.two-steps',
      payload: z.object({}),
      run: async (ctx) => {
        await ctx.step('one', async () => ({ data: 1 }));
        await ctx.step('two', async () => ({ data: 2 }));
        return { result: 'ok' };
      },
    });

  const makeProcessor = (cache?: CompletedCache) =>
    new JobProcessor({
      store: new DynamoDbJobStore({ client: clients.doc, tableName: outputs.JobsTableName }),
      queue: new SqsJobQueue({
        client: clients.sqs,
        queueUrl: outputs.JobsQueueUrl,
        deadLetterQueueUrl: outputs.DlqUrl,
      }),
      registry,
      worker: 'bench',
      logger: new Logger({ logLevel: 'SILENT' }),
      ...(cache ? { cache } : {}),
    });

  const send = async (jobs: { dedupKey: string; type: string; payload: unknown }[]) => {
    for (let i = 0; i < jobs.length; i += 10) {
      await control.sqs.send(
        new SendMessageBatchCommand({
          QueueUrl: outputs.JobsQueueUrl,
          Entries: jobs.slice(i, i + 10).map((j, n) => ({
            Id: String(n),
            MessageBody: JSON.stringify(makeEnvelope({ id: randomUUID(), ...j })),
          })),
        }),
      );
    }
  };
  const queueEmpty = async () => {
    const out = await control.sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: outputs.JobsQueueUrl,
        AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
      }),
    );
    const a = out.Attributes ?? {};
    return (
      Number(a.ApproximateNumberOfMessages ?? 0) + Number(a.ApproximateNumberOfMessagesNotVisible ?? 0) === 0
    );
  };
  const drain = async (processor: JobProcessor, expected: number) => {
    let seen = 0;
    while (seen < expected || !(await queueEmpty())) {
      const r = await pollOnce({
        sqs: clients.sqs,
        queueUrl: outputs.JobsQueueUrl,
        queueArn,
        region: await clients.sqs.config.region(),
        handle: async (records) => (await processBatch(records, processor)).response,
        waitSeconds: 1,
      });
      seen += r.received;
    }
  };

  const rows: {
    scenario: string;
    jobs: number;
    ddbWrites: number;
    ddbReads: number;
    sqs: number;
    detail: string;
  }[] = [];
  const measure = async (scenario: string, jobs: number, run: () => Promise<void>) => {
    counter.reset();
    await run();
    const snap = counter.snapshot();
    const writes = DDB_WRITES.reduce((n, c) => n + counter.count('DynamoDB', c), 0);
    const reads = counter.count('DynamoDB') - writes;
    rows.push({
      scenario,
      jobs,
      ddbWrites: writes / jobs,
      ddbReads: reads / jobs,
      sqs: counter.count('SQS') / jobs,
      detail: Object.entries(snap)
        .map(([k, v]) => `${k}=${v}`)
        .join(' '),
    });
  };

  const keys = Array.from({ length: JOBS }, (_, i) => `bench-${prefix}-${i}`);
  const plain = makeProcessor();
  process.stderr.write(`bench: ${JOBS} jobs per scenario against ${emulator.endpoint}\n`);
  await measure('happy path (claim + fenced commit)', JOBS, async () => {
    await send(
      keys.map((k, i) => ({
        dedupKey: k,
        type: 'bench.credit',
        payload: { account: `acct-${i}`, amount: 1 },
      })),
    );
    await drain(plain, JOBS);
  });
  await measure('contended: 2 accounts, 10 jobs at once', JOBS, async () => {
    await send(
      keys.map((k, i) => ({
        dedupKey: `${k}-hot`,
        type: 'bench.credit',
        payload: { account: `hot-${i % 2}`, amount: 1 },
      })),
    );
    await drain(plain, JOBS);
  });
  await measure('duplicate of a completed job (no cache)', JOBS, async () => {
    await send(
      keys.map((k) => ({ dedupKey: k, type: 'bench.credit', payload: { account: 'acct-0', amount: 1 } })),
    );
    await drain(plain, JOBS);
  });
  const cache = new CompletedCache();
  for (const k of keys) cache.add(k);
  await measure('duplicate, local-cache hit', JOBS, async () => {
    await send(
      keys.map((k) => ({ dedupKey: k, type: 'bench.credit', payload: { account: 'acct-0', amount: 1 } })),
    );
    await drain(makeProcessor(cache), JOBS);
  });
  await measure('two checkpointed steps', JOBS, async () => {
    await send(keys.map((k) => ({ dedupKey: `${k}-steps`, type: 'bench.two-steps', payload: {} })));
    await drain(plain, JOBS);
  });
  destroyAwsClients(clients);

  const fmt = (n: number) => n.toFixed(2);
  const header = ['scenario', 'jobs', 'DDB writes/job', 'DDB reads/job', 'SQS req/job (worker)'];
  const table = rows.map((r) => [r.scenario, String(r.jobs), fmt(r.ddbWrites), fmt(r.ddbReads), fmt(r.sqs)]);
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((row) => row[i]?.length ?? 0)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(' | ');
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('-|-'));
  for (const row of table) console.log(line(row));
  console.log('\nrequests by command:');
  for (const r of rows) console.log(`  ${r.scenario}: ${r.detail}`);
  console.log(
    "\n(SQS receive/delete are per batch of up to 10, so they amortise; DDB reads are the job's own reads.)",
  );
  if (emulator.started)
    process.stderr.write('bench: the emulator stays up; `npx leaseq local down` stops it\n');
}

main().catch((error: unknown) => {
  console.error(`bench failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
