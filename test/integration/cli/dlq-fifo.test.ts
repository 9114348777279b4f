import { ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { destroyAwsClients } from '../../../shared/aws/clients.ts';
import { deadLetterAttributes } from '../../../shared/core/adapters/sqs-job-queue.ts';
import { makeEnvelope } from '../../../shared/core/contract/envelope.ts';
import type { DeadLetterSummary } from '../../../shared/ops/dlq-letters.ts';
import { type RedriveReport, redrive } from '../../../shared/ops/dlq-redrive.ts';
import { type CoreEnv, coreEnv, queueCounts } from '../../support/core-fixture.ts';
import { testClients, uniqueName } from '../../support/env.ts';
import { drainQueue } from '../../support/fresh-queues.ts';
import { type CliRun, leaseq } from './run-cli.ts';

let env: CoreEnv;
let prefix: string;

beforeAll(async () => {
  env = await coreEnv('clidlqfifo', { fifo: true });
  prefix = env.jobsTable.replace(/-jobs$/, '');
});
afterAll(() => env?.close());

/** The CLI on this FIFO stack (the prefix alone names standard queues). */
const fifoCli = (args: readonly string[]): Promise<CliRun> =>
  leaseq([...args, '--prefix', prefix], { LEASEQ_FIFO: 'true' });

async function fifoJson<T>(args: readonly string[]): Promise<T> {
  const run = await fifoCli([...args, '--json']);
  if (run.code !== 0) throw new Error(`leaseq ${args.join(' ')} exited ${run.code}: ${run.stderr.trim()}`);
  return JSON.parse(run.stdout) as T;
}
// The CLI finds the queues by the stack's prefix, so the cases share them: each starts on them emptied.
beforeEach(async () => {
  await Promise.all([drainQueue(env, env.dlqUrl), drainQueue(env, env.queueUrl)]);
});

/**
 * Puts 25 letters of one FIFO group into the DLQ, as the dead-letterer sends them: letter 1 a
 * `permanent-error`, letters 2-25 `max-attempts`. Returns their dedup keys in order.
 */
async function oneGroupOf25(): Promise<string[]> {
  const group = uniqueName('g');
  const keys = Array.from({ length: 25 }, (_, i) => uniqueName(`l${i + 1}-`));
  for (const [i, dedupKey] of keys.entries()) {
    const messageId = uniqueName('orig');
    await env.clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: env.dlqUrl,
        MessageBody: JSON.stringify(
          makeEnvelope({ id: uniqueName('m'), dedupKey, type: 'ledger.credit', payload: { amount: 1 } }),
        ),
        MessageAttributes: deadLetterAttributes({
          reason: i === 0 ? 'permanent-error' : 'max-attempts',
          errorClass: 'PermanentJobError',
          errorMessage: 'no',
          attempts: 3,
          dedupKey,
          worker: 'w-fifo',
          messageId,
          type: 'ledger.credit',
        }),
        MessageGroupId: group,
        MessageDeduplicationId: `${messageId}-dead`,
      }),
    );
  }
  return keys;
}

describe('Command: leaseq dlq, on a FIFO DLQ holding one group of 25 letters', () => {
  it('a --reason filter redrives every letter that matches, though one letter it keeps heads the group', async () => {
    // Prepare
    await oneGroupOf25();

    // Act
    const report = await fifoJson<RedriveReport>(['dlq', 'redrive', '--reason', 'max-attempts', '--yes']);

    // Assess: 24 sent back (was 9: the kept head blocked the group), the kept one released at once.
    expect(report).toMatchObject({ redriven: 24, notMatched: 1, failed: 0, dlqDepth: 25, seen: 25 });
    expect(await queueCounts(env)).toMatchObject({ visible: 24 });
    expect(await queueCounts(env, env.dlqUrl)).toEqual({ visible: 1, inFlight: 0, delayed: 0 });
  }, 180_000);

  it('list, show and a --dedup-key redrive say how many letters they saw of those the DLQ holds', async () => {
    // Prepare: SQS shows a FIFO group's first 10 letters only until they are deleted (received and
    // released, they come back first), so letters 11-25 cannot be browsed; the commands must say so.
    const keys = await oneGroupOf25();
    const twentieth = keys[19] ?? '';

    // Act
    const table = await fifoCli(['dlq', 'list', '--letters', '--limit', '100']);
    const listed = await fifoCli(['dlq', 'list', '--letters', '--limit', '100', '--json']);
    const shown = await fifoCli(['dlq', 'show', twentieth]);
    const dry = await fifoJson<RedriveReport>(['dlq', 'redrive', '--dedup-key', twentieth, '--dry-run']);

    // Assess: each says it saw 10 of 25 and why; nothing was changed, nothing is left hidden.
    expect(table.code).toBe(0);
    expect(table.stderr).toMatch(/saw 10 of the 25 letters the DLQ holds/);
    expect(table.stderr).toMatch(/FIFO/);
    expect((JSON.parse(listed.stdout) as DeadLetterSummary[]).map((l) => l.dedupKey)).toEqual(
      keys.slice(0, 10),
    );
    expect(listed.stderr).toMatch(/saw 10 of the 25 letters the DLQ holds/);
    expect(shown.code).toBe(1);
    expect(shown.stderr).toMatch(
      new RegExp(`no message ${twentieth} in the DLQ \\(saw 10 of the 25 letters it holds;.*FIFO`),
    );
    expect(dry).toMatchObject({ matched: 0, notMatched: 10, dlqDepth: 25, seen: 10 });
    expect(await queueCounts(env, env.dlqUrl)).toEqual({ visible: 25, inFlight: 0, delayed: 0 });
  }, 180_000);

  it("a redrive at 0.5 letters/h browses with SQS's 12 h maximum visibility, which SQS accepts", async () => {
    // Prepare: the uncapped 60 + 10/rate would be 72,060 s, which AWS refuses (the emulator does not).
    const keys = await oneGroupOf25();
    const clients = testClients();
    const asked: number[] = [];
    clients.sqs.middlewareStack.add(
      (next, context) => async (args) => {
        const input = args.input as { VisibilityTimeout?: number };
        if (context.commandName === 'ReceiveMessageCommand' && input.VisibilityTimeout !== undefined) {
          asked.push(input.VisibilityTimeout);
        }
        return next(args);
      },
      { step: 'initialize', name: 'recordVisibility' },
    );
    const names = {
      queueUrl: env.queueUrl,
      dlqUrl: env.dlqUrl,
      jobsTable: env.jobsTable,
      leasesTable: env.leasesTable,
    };

    try {
      // Act: the head letter alone (the pacer's first permit is at once).
      const report = await redrive(
        { clients, names },
        { filter: { dedupKey: keys[0] ?? '' }, ratePerSecond: 0.5 / 3600, limit: 1 },
      );

      // Assess
      expect(report).toMatchObject({ redriven: 1, failed: 0 });
      expect(new Set(asked)).toEqual(new Set([43_200]));
      expect(await queueCounts(env, env.dlqUrl)).toEqual({ visible: 24, inFlight: 0, delayed: 0 });
    } finally {
      destroyAwsClients(clients);
    }
  }, 180_000);
});

describe('Function: redrive, on a FIFO DLQ with two letters of one key (issue 31)', () => {
  it("sends the newest death's letter though the older one heads the group, and keeps the older", async () => {
    // Prepare: the key was reset by a fresh send after its first death; the new job died too. Both
    // letters in the key's group, the older first.
    const dedupKey = uniqueName('fifo2');
    const group = uniqueName('g');
    const now = Date.now();
    await env.clients.doc.send(
      new PutCommand({
        TableName: env.jobsTable,
        Item: {
          dedupKey,
          status: 'DEAD',
          type: 'ledger.credit',
          messageId: 'm-second',
          token: 8,
          attempts: 3,
          version: 9,
          leaseUntil: 0,
          deadAt: now - 1000,
          history: [{ e: 'reset', at: now - 60_000, wasDeadAt: now - 120_000 }],
        },
      }),
    );
    for (const [v, messageId, deadAt] of [
      [1, 'm-first', now - 120_000],
      [2, 'm-second', now - 1000],
    ] as const) {
      await env.clients.sqs.send(
        new SendMessageCommand({
          QueueUrl: env.dlqUrl,
          MessageBody: JSON.stringify(
            makeEnvelope({ id: `v${v}`, dedupKey, type: 'ledger.credit', payload: { v } }),
          ),
          MessageAttributes: {
            ...deadLetterAttributes({
              reason: 'max-attempts',
              errorClass: 'Error',
              errorMessage: 'no',
              attempts: 3,
              dedupKey,
              worker: 'w-fifo',
              messageId,
              type: 'ledger.credit',
            }),
            'leaseq.deadAt': { DataType: 'String', StringValue: new Date(deadAt).toISOString() },
          },
          MessageGroupId: group,
          MessageDeduplicationId: `${messageId}-dead`,
        }),
      );
    }
    const names = {
      queueUrl: env.queueUrl,
      dlqUrl: env.dlqUrl,
      jobsTable: env.jobsTable,
      leasesTable: env.leasesTable,
    };

    // Act
    const report = await redrive({ clients: env.clients, names }, { filter: { dedupKey } });

    // Assess: v2 sent, v1 skipped as the older job's and released (visible again at once).
    expect(report).toMatchObject({ matched: 2, redriven: 1, skipped: 1 });
    expect(report.items.find((i) => i.outcome === 'skipped')).toMatchObject({ skip: 'newer-job' });
    const sent = await env.clients.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: env.queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
    );
    expect((sent.Messages ?? []).map((m) => JSON.parse(m.Body ?? '{}').payload)).toEqual([{ v: 2 }]);
    expect(await queueCounts(env, env.dlqUrl)).toEqual({ visible: 1, inFlight: 0, delayed: 0 });
  }, 60_000);
});
