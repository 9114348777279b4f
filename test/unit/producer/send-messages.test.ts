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
});
