import type { SendMessageCommandInput, SQSClient } from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { SqsJobQueue } from '../../../../shared/core/adapters/sqs-job-queue.ts';
import type { DeadLetterReason } from '../../../../shared/core/contract/job-queue.ts';

// What the adapter asks SQS for. The emulator takes a deduplication id on a standard queue; AWS refuses it
// ("not valid for this queue type"), so the request itself is what must be right.
function capturing(): { client: SQSClient; sent: SendMessageCommandInput[] } {
  const sent: SendMessageCommandInput[] = [];
  const client = {
    send: async (command: { input: SendMessageCommandInput }) => {
      sent.push(command.input);
      return { MessageId: 'm' };
    },
  } as unknown as SQSClient;
  return { client, sent };
}

const reason: DeadLetterReason = {
  reason: 'max-attempts',
  errorClass: 'Error',
  errorMessage: 'boom',
  attempts: 5,
  worker: 'w-1',
  messageId: '8f0c2b8e-5b7a-4a57-9d83-3c1f1f0f6a11',
  dedupKey: 'order-1',
};

describe('Class: SqsJobQueue', () => {
  describe('Method: sendToDeadLetter', () => {
    it("sends no group or deduplication id to a standard DLQ, though the record had a group (a fair queue's tenant)", async () => {
      const { client, sent } = capturing();
      const queue = new SqsJobQueue({
        client,
        queueUrl: 'http://127.0.0.1:9/000000000000/app-jobs',
        deadLetterQueueUrl: 'http://127.0.0.1:9/000000000000/app-jobs-dlq',
      });
      await queue.sendToDeadLetter('{}', reason, 'tenant-a');
      expect(sent).toHaveLength(1);
      expect(sent[0]).not.toHaveProperty('MessageGroupId');
      expect(sent[0]).not.toHaveProperty('MessageDeduplicationId');
    });

    it("keeps the record's group on a FIFO DLQ, with a deduplication id per message", async () => {
      const { client, sent } = capturing();
      const queue = new SqsJobQueue({
        client,
        queueUrl: 'http://127.0.0.1:9/000000000000/app-jobs.fifo',
        deadLetterQueueUrl: 'http://127.0.0.1:9/000000000000/app-jobs-dlq.fifo',
      });
      await queue.sendToDeadLetter('{}', reason, 'account-7');
      expect(sent[0]).toMatchObject({
        MessageGroupId: 'account-7',
        MessageDeduplicationId: `${reason.messageId}-dead`,
      });
    });
  });
});
