// DLQ tooling that leaves the DLQ alone: `dlq list` reads the dead jobs from the problems index (no
// letter received), `dlq show` cuts a long body, and a closed stdout (`| head -1`) is a clean exit.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { UpdateTableCommand } from '@aws-sdk/client-dynamodb';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import ledgerJobs from '../../../examples/ledger/jobs.ts';
import { problemShard } from '../../../shared/core/contract/job-history.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import type { DeadLetterSummary } from '../../../shared/ops/dlq-letters.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  makeWorker,
  queueCounts,
  sendJob,
  sendRaw,
} from '../../support/core-fixture.ts';
import { testEndpoint, uniqueName } from '../../support/env.ts';
import { leaseq, leaseqJson } from './run-cli.ts';

const BIN = fileURLToPath(new URL('../../../bin/leaseq.mjs', import.meta.url));

let env: CoreEnv;
let prefix: string;

beforeAll(async () => {
  env = await coreEnv('clidlqt');
  prefix = env.jobsTable.replace(/-jobs$/, '');
});
afterAll(() => env?.close());

async function drain(e: CoreEnv): Promise<void> {
  const worker = makeWorker(e, ledgerJobs, { worker: 'w-tools', maxAttempts: 1 });
  const done = await eventually(
    async () => {
      await worker.poll();
      const q = await queueCounts(e);
      return q.visible + q.inFlight + q.delayed === 0;
    },
    30_000,
    100,
  );
  expect(done).toBe(true);
}

/**
 * Gives a DEAD item the problems index keys and `deadAt` that the dead marking of the `history` branch
 * writes (not merged into this one yet: here only a redrive sets them). The item is otherwise the real one
 * the worker left; once that branch is in, this rewrites the same values.
 */
async function asTheHistoryWritersLeaveIt(e: CoreEnv, dedupKey: string): Promise<void> {
  const item = await e.clients.doc.send(new GetCommand({ TableName: e.jobsTable, Key: { dedupKey } }));
  expect(item.Item?.status).toBe(JobStatus.Dead);
  const at = Number(item.Item?.updatedAt ?? Date.now());
  await e.clients.doc.send(
    new UpdateCommand({
      TableName: e.jobsTable,
      Key: { dedupKey },
      UpdateExpression:
        'SET problemShard = :shard, problemAt = if_not_exists(problemAt, :at), deadAt = if_not_exists(deadAt, :at)',
      ExpressionAttributeValues: { ':shard': problemShard(dedupKey), ':at': at },
    }),
  );
}

/** The DLQ's letters with their receive counts; received with visibility 0, so they stay visible. */
async function letterReceiveCounts(e: CoreEnv): Promise<Map<string, number>> {
  const out = await e.clients.sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: e.dlqUrl,
      MaxNumberOfMessages: 10,
      WaitTimeSeconds: 1,
      VisibilityTimeout: 0,
      MessageSystemAttributeNames: ['ApproximateReceiveCount'],
    }),
  );
  return new Map(
    (out.Messages ?? []).map((m) => [m.MessageId ?? '', Number(m.Attributes?.ApproximateReceiveCount)]),
  );
}

/** `leaseq <args> | head -1` through a shell; the exit status is leaseq's (pipefail), stderr kept apart. */
function pipedToHead(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const quoted = args.map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
  return new Promise((resolve) => {
    execFile(
      'bash',
      ['-c', `set -o pipefail; '${process.execPath}' '${BIN}' ${quoted} | head -1`],
      { env: { ...process.env, AWS_ENDPOINT_URL: testEndpoint(), LEASEQ_DEBUG: '' }, timeout: 60_000 },
      (error, stdout, stderr) => {
        const code = error && typeof error.code === 'number' ? error.code : error ? 1 : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

describe('Command: leaseq dlq list from the problems index', () => {
  it('shows the error of a dead-lettered job and receives no letter', async () => {
    // Prepare: a job that fails permanently is dead-lettered (its item DEAD, one letter in the DLQ).
    const poison = uniqueName('poison');
    await sendJob(env, {
      dedupKey: poison,
      type: 'ledger.credit',
      payload: { account: uniqueName('acct'), amount: 1, simulate: { permanent: true } },
    });
    await drain(env);
    expect((await queueCounts(env, env.dlqUrl)).visible).toBe(1);
    await asTheHistoryWritersLeaveIt(env, poison);

    // Act
    const table = await leaseq(['dlq', 'list', '--prefix', prefix]);
    const listed = await leaseqJson<DeadLetterSummary[]>(['dlq', 'list', '--prefix', prefix]);
    const inFlightRightAfter = (await queueCounts(env, env.dlqUrl)).inFlight;

    // Assess: no letter was received: none in flight, and the one receive below is the letter's first.
    expect(inFlightRightAfter).toBe(0);
    expect([...(await letterReceiveCounts(env)).values()]).toEqual([1]);
    // The error column (class and message), from the item, for the job.
    expect(table.code, table.stderr).toBe(0);
    const [header, row] = table.stdout.split('\n');
    expect(header).toMatch(/^DEDUP KEY\s+TYPE\s+REASON\s+ATTEMPTS\s+DEAD AT\s+ERROR$/);
    expect(row).toMatch(
      new RegExp(
        `^${poison}\\s+ledger\\.credit\\s+permanent-error\\s+1\\s+\\S+ \\(.* ago\\)\\s+PermanentJobError: simulated permanent failure$`,
      ),
    );
    expect(listed).toEqual([
      expect.objectContaining({
        dedupKey: poison,
        type: 'ledger.credit',
        reason: 'permanent-error',
        errorClass: 'PermanentJobError',
        errorMessage: 'PermanentJobError: simulated permanent failure',
        attempts: 1,
      }),
    ]);
  });

  it('--letters lists by receiving the letters: message id and receive count, and the error column', async () => {
    const table = await leaseq(['dlq', 'list', '--letters', '--prefix', prefix]);
    const letters = await leaseqJson<DeadLetterSummary[]>(['dlq', 'list', '--letters', '--prefix', prefix]);

    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout.split('\n')[0]).toMatch(/^MESSAGE ID\s+DEDUP KEY\s+TYPE\s+REASON\s+.*\bERROR$/);
    expect(table.stdout).toMatch(/permanent-error.*PermanentJobError: simulated permanent failure$/m);
    expect(letters).toHaveLength(1);
    expect(letters[0]).toMatchObject({ messageId: expect.any(String), receiveCount: expect.any(Number) });
  });
});

describe('Command: leaseq dlq show of a long body', () => {
  // A body that is not JSON is dead-lettered as it is: 3,000 lines, about 100 KB (more than a pipe holds).
  const lines = Array.from(
    { length: 3000 },
    (_, i) => `line ${String(i).padStart(4, '0')} ${'x'.repeat(24)}`,
  );
  let id = '';

  beforeAll(async () => {
    await sendRaw(env, lines.join('\n'));
    await drain(env);
    const out = await env.clients.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: env.dlqUrl, MaxNumberOfMessages: 10, VisibilityTimeout: 0 }),
    );
    id = out.Messages?.find((m) => m.Body?.startsWith('line 0000'))?.MessageId ?? '';
    expect(id).not.toBe('');
  });

  it('cuts the body to its first 2 KB and says how to see all of it; --full shows all', async () => {
    const cut = await leaseq(['dlq', 'show', id, '--prefix', prefix]);
    const full = await leaseq(['dlq', 'show', id, '--full', '--prefix', prefix]);

    expect(cut.code, cut.stderr).toBe(0);
    expect(cut.stdout).toContain(lines[0]);
    expect(cut.stdout).not.toContain(lines[2999]);
    expect(cut.stdout).toMatch(
      /\n… \d+ more bytes of the body not shown \(2048 of \d+ shown\); --full shows all\n$/,
    );
    expect(cut.stdout.length).toBeLessThan(4096);
    expect(full.code, full.stderr).toBe(0);
    expect(full.stdout).toContain(`${lines[2998]}\n${lines[2999]}\n`);
  });

  it.each([[['--json']], [['--full']]])(
    'dlq show %j | head -1 exits 0 with no stack trace',
    async (flags) => {
      const run = await pipedToHead(['dlq', 'show', id, ...flags, '--prefix', prefix]);

      expect(run.stdout.split('\n')).toHaveLength(2);
      expect(run.stderr).not.toMatch(/EPIPE|\n\s+at /);
      expect(run.code, run.stderr).toBe(0);
    },
  );
});

describe('Command: leaseq dlq list on a table without the problems index', () => {
  it('falls back to receiving the letters, and says so in one stderr line', async () => {
    // Prepare: a table made before the index (its index dropped), one dead-lettered job.
    const old = await coreEnv('clidlqold');
    try {
      await old.clients.ddb.send(
        new UpdateTableCommand({
          TableName: old.jobsTable,
          GlobalSecondaryIndexUpdates: [{ Delete: { IndexName: 'problems' } }],
        }),
      );
      const poison = uniqueName('poison');
      await sendJob(old, {
        dedupKey: poison,
        type: 'ledger.credit',
        payload: { account: uniqueName('acct'), amount: 1, simulate: { permanent: true } },
      });
      await drain(old);
      const oldPrefix = old.jobsTable.replace(/-jobs$/, '');

      // Act
      const run = await leaseq(['dlq', 'list', '--json', '--prefix', oldPrefix]);

      // Assess: the letters, as `--letters` lists them; one line says why.
      expect(run.code, run.stderr).toBe(0);
      const letters = JSON.parse(run.stdout) as DeadLetterSummary[];
      expect(letters).toEqual([
        expect.objectContaining({
          messageId: expect.any(String),
          dedupKey: poison,
          reason: 'permanent-error',
        }),
      ]);
      const notes = run.stderr.split('\n').filter((l) => l !== '' && !l.startsWith('leaseq: target:'));
      expect(notes).toEqual([expect.stringMatching(/no `problems` index.*receiving the letters/)]);
    } finally {
      old.close();
    }
  });
});
