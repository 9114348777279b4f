/**
 * What one DynamoDB request of each kind the benchmark's consumers make costs the emulator: requests
 * per second at a fixed number in flight, fresh keys, rounds interleaved, medians (min-max). The
 * side-by-side benchmark is emulator-bound, and the emulator's cost per request grows with the request's
 * expressions, so this is the measured reason behind its throughput ratios (bench/README.md). Figures,
 * never assertions.
 *
 *   npm run bench:emulator        (BENCH_REQUESTS=600 BENCH_IN_FLIGHT=10 BENCH_ROUNDS=5)
 */
import { CreateTableCommand, DeleteTableCommand, waitUntilTableExists } from '@aws-sdk/client-dynamodb';
import { PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { awsConfigFromEnv, createAwsClients, destroyAwsClients } from '../shared/aws/clients.ts';
import { DynamoDbJobStore } from '../shared/core/adapters/dynamodb-job-store.ts';
import { problemsIndexOfJobsTable } from '../shared/core/adapters/dynamodb-problems.ts';
import type { Effect } from '../shared/core/contract/job-store.ts';
import { ensureEmulator } from '../shared/local/emulator.ts';
import { median, minMax, renderTable } from './report.ts';

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 600);
const IN_FLIGHT = Number(process.env.BENCH_IN_FLIGHT ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

async function main(): Promise<void> {
  const emulator = await ensureEmulator({ log: (line) => process.stderr.write(`${line}\n`) });
  const clients = createAwsClients({ ...awsConfigFromEnv(), endpoint: emulator.endpoint });
  const stamp = Date.now().toString(36);
  const tables = {
    jobs: `emucost-jobs-${stamp}`,
    counters: `emucost-counters-${stamp}`,
    idem: `emucost-idem-${stamp}`,
  };
  const keys = { jobs: 'dedupKey', counters: 'k', idem: 'id' } as const;
  try {
    for (const [name, table] of Object.entries(tables)) {
      const key = keys[name as keyof typeof keys];
      await clients.ddb.send(
        new CreateTableCommand({
          TableName: table,
          BillingMode: 'PAY_PER_REQUEST',
          KeySchema: [{ AttributeName: key, KeyType: 'HASH' }],
          // The jobs table as the stack makes it: with the sparse problems index, so a problem's index write
          // is in the figures (a first-time success makes none).
          ...(name === 'jobs' ? problemsIndexOfJobsTable() : {}),
          AttributeDefinitions: [
            { AttributeName: key, AttributeType: 'S' },
            ...(name === 'jobs' ? problemsIndexOfJobsTable().AttributeDefinitions : []),
          ],
        }),
      );
      await waitUntilTableExists({ client: clients.ddb, maxWaitTime: 60 }, { TableName: table });
    }
    const store = new DynamoDbJobStore({ client: clients.doc, tableName: tables.jobs });
    const counter = (id: string): NonNullable<Effect['Update']> & { Key: Record<string, unknown> } => ({
      TableName: tables.counters,
      Key: { k: id },
      UpdateExpression: 'ADD #n :one',
      ExpressionAttributeNames: { '#n': 'n' },
      ExpressionAttributeValues: { ':one': 1 },
    });
    const job = (id: string) => ({
      dedupKey: id,
      owner: 'bench',
      messageId: id,
      type: 'bench.count',
      createdAt: new Date().toISOString(),
      now: Date.now(),
    });
    // The requests, by who makes them; each call gets a key of its own.
    const kinds: Record<string, (id: string) => Promise<unknown>> = {
      'the effect: UpdateItem ADD (bare, every consumer)': (id) =>
        clients.doc.send(new UpdateCommand(counter(id))),
      'Powertools-like conditional PutItem (in progress)': (id) =>
        clients.doc.send(
          new PutCommand({
            TableName: tables.idem,
            Item: { id, status: 'INPROGRESS', expiration: 1, in_progress_expiration: 1 },
            ConditionExpression:
              'attribute_not_exists(#id) OR #expiry < :now OR ' +
              '(#status = :inprogress AND attribute_exists(#ipe) AND #ipe < :nowMs)',
            ExpressionAttributeNames: {
              '#id': 'id',
              '#expiry': 'expiration',
              '#ipe': 'in_progress_expiration',
              '#status': 'status',
            },
            ExpressionAttributeValues: { ':now': 1, ':nowMs': 1, ':inprogress': 'INPROGRESS' },
          }),
        ),
      'leaseq claim (UpdateItem, 13 attributes)': (id) => store.claim({ ...job(id), leaseMs: 30_000 }),
      'leaseq fast commit (job item + effect, one tx)': (id) =>
        store.claimAndComplete({ ...job(id), maxAttempts: 5 }, null, [{ Update: counter(`fx-${id}`) }]),
    };
    const results = new Map<string, number[]>(Object.keys(kinds).map((k) => [k, []]));
    process.stderr.write(
      `bench:emulator: ${REQUESTS} requests x ${ROUNDS} rounds per kind, ${IN_FLIGHT} in flight, at ${emulator.endpoint}\n`,
    );
    for (let round = 0; round < ROUNDS; round++) {
      for (const [kind, call] of Object.entries(kinds)) {
        let next = 0;
        const started = performance.now();
        await Promise.all(
          Array.from({ length: IN_FLIGHT }, async () => {
            while (next < REQUESTS) await call(`r${round}-${next++}`);
          }),
        );
        results.get(kind)?.push(REQUESTS / ((performance.now() - started) / 1000));
      }
      process.stderr.write(`  round ${round + 1}/${ROUNDS} done\n`);
    }
    const rows = [...results].map(([kind, perSecond]) => {
      const m = median(perSecond);
      const [min, max] = minMax(perSecond);
      return [kind, m.toFixed(0), `${min.toFixed(0)}-${max.toFixed(0)}`, (1000 / m).toFixed(2)];
    });
    process.stdout.write(
      `\nEmulator cost per request (median of ${ROUNDS} rounds, ${IN_FLIGHT} in flight)\n` +
        `${renderTable(['request', 'per s', 'min-max', 'ms each'], rows, [false, true, true, true])}\n`,
    );
  } finally {
    for (const table of Object.values(tables)) {
      await clients.ddb.send(new DeleteTableCommand({ TableName: table })).catch(() => undefined);
    }
    destroyAwsClients(clients);
  }
}

await main();
