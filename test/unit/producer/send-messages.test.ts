import type { SendMessageBatchCommandInput, SQSClient } from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { type OutgoingMessage, sendMessages } from '../../../shared/producer/send-messages.ts';

/** An SQS stand-in that takes every entry after a short wait and counts the calls in flight. */
function slowSqs() {
  const calls: SendMessageBatchCommandInput[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const client = {
    send: async (command: { input: SendMessageBatchCommandInput }) => {
      calls.push(command.input);
      inFlight += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await new Promise((resolve) => setTimeout(resolve, 5));
      inFlight -= 1;
      return { Successful: (command.input.Entries ?? []).map((e) => ({ Id: e.Id, MessageId: `m-${e.Id}` })) };
    },
  } as unknown as SQSClient;
  return { client, calls, maxInFlight: () => maxInFlight };
}

const FIFO_URL = 'http://127.0.0.1:9/000000000000/app-jobs.fifo';
const messages = (n: number, groupId?: string): OutgoingMessage[] =>
  Array.from({ length: n }, (_, i) => ({
    body: `{"n":${i}}`,
    dedupKey: `k-${i}`,
    ...(groupId === undefined ? {} : { groupId }),
  }));

describe('Function: sendMessages', () => {
  it('sends the batches of a FIFO send with chosen groups one after another, so a group keeps its send order', async () => {
    const sqs = slowSqs();
    await sendMessages(sqs.client, FIFO_URL, messages(35, 'account-7'));
    expect(sqs.maxInFlight()).toBe(1);
    const bodies = sqs.calls.flatMap((c) => (c.Entries ?? []).map((e) => e.MessageBody));
    expect(bodies).toEqual(messages(35).map((m) => m.body));
    expect(new Set(sqs.calls.flatMap((c) => (c.Entries ?? []).map((e) => e.MessageGroupId)))).toEqual(
      new Set(['account-7']),
    );
  });

  it('keeps batches in parallel when every job is its own group', async () => {
    const sqs = slowSqs();
    await sendMessages(sqs.client, FIFO_URL, messages(35));
    expect(sqs.maxInFlight()).toBe(4);
  });

  /** An SQS stand-in that fails the given entries (by body's n) once with its own fault, and records arrivals. */
  function flakySqs(failOnce: Set<number>) {
    const arrivals: { n: number; group: string | undefined }[] = [];
    const client = {
      send: async (command: { input: SendMessageBatchCommandInput }) => {
        const Successful: { Id?: string; MessageId: string }[] = [];
        const Failed: { Id?: string; SenderFault: boolean; Code: string }[] = [];
        for (const e of command.input.Entries ?? []) {
          const n = (JSON.parse(e.MessageBody ?? '{}') as { n: number }).n;
          if (failOnce.delete(n)) Failed.push({ Id: e.Id, SenderFault: false, Code: 'InternalError' });
          else {
            arrivals.push({ n, group: e.MessageGroupId });
            Successful.push({ Id: e.Id, MessageId: `m-${n}` });
          }
        }
        return { Successful, Failed };
      },
    } as unknown as SQSClient;
    return { client, arrivals };
  }

  it('never lets a chosen group reach the queue out of send order when SQS fails one entry on its side', async () => {
    // Job 0 fails once while jobs 1-9 of its group are taken in the same batch: a retry would land behind
    // them. It is reported failed instead, and the group's later jobs (10-14, next batch) are not sent.
    const sqs = flakySqs(new Set([0]));
    const failed: string[] = [];
    const report = await sendMessages(sqs.client, FIFO_URL, messages(15, 'g'), {
      onFailed: (m, f) => failed.push(`${m.dedupKey}:${f.code}`),
    });
    const order = sqs.arrivals.map((a) => a.n);
    expect(order).toEqual([...order].sort((a, b) => a - b));
    expect(order).not.toContain(0);
    expect(order.some((n) => n >= 10)).toBe(false);
    expect(report.failed).toBe(6);
    expect(failed[0]).toBe('k-0:InternalError');
    expect(failed.slice(1)).toEqual([10, 11, 12, 13, 14].map((n) => `k-${n}:GroupOrderBroken`));
  });

  it('retries an entry SQS failed on its side when nothing of its group came after it', async () => {
    // The last job of a batch fails once: its retry still comes before the next batch.
    const sqs = flakySqs(new Set([9]));
    const report = await sendMessages(sqs.client, FIFO_URL, messages(15, 'g'));
    expect(sqs.arrivals.map((a) => a.n)).toEqual(Array.from({ length: 15 }, (_, i) => i));
    expect(report).toMatchObject({ sent: 15, failed: 0 });
  });
});
