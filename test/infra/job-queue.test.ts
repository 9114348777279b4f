import { App, Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { JobQueue, type JobQueueProps } from '../../infra/constructs/job-queue.ts';

function props(overrides: Partial<JobQueueProps> = {}): JobQueueProps {
  return {
    queueName: 'q-jobs',
    deadLetterQueueName: 'q-jobs-dlq',
    consumerTimeout: Duration.seconds(30),
    maxReceiveCount: 4,
    removalPolicy: RemovalPolicy.DESTROY,
    ...overrides,
  };
}

function build(overrides: Partial<JobQueueProps> = {}): Template {
  const stack = new Stack(new App(), 'Test');
  new JobQueue(stack, 'JobQueue', props(overrides));
  return Template.fromStack(stack);
}

describe('Class: JobQueue', () => {
  describe('Method: constructor', () => {
    it('defaults the visibility timeout to 6x the consumer timeout', () => {
      build().hasResourceProperties('AWS::SQS::Queue', { QueueName: 'q-jobs', VisibilityTimeout: 180 });
    });

    it('accepts a longer visibility timeout', () => {
      build({ visibilityTimeout: Duration.minutes(10) }).hasResourceProperties('AWS::SQS::Queue', {
        QueueName: 'q-jobs',
        VisibilityTimeout: 600,
      });
    });

    it.each<[Partial<JobQueueProps>, RegExp]>([
      [{ visibilityTimeout: Duration.seconds(179) }, /visibilityTimeout is 179 s; expected at least 180 s/],
      [
        { consumerTimeout: Duration.hours(3) },
        /visibilityTimeout is 64800 s; expected at most 43200 s \(the SQS limit of 12 hours\)/,
      ],
      [{ maxReceiveCount: 0 }, /maxReceiveCount is 0; expected an integer from 1 to 1000/],
      [{ maxReceiveCount: 1001 }, /maxReceiveCount is 1001; expected an integer from 1 to 1000/],
      [{ fifo: true }, /queueName is "q-jobs"; expected a name ending in ".fifo" because fifo is true/],
      [
        { queueName: 'q-jobs.fifo' },
        /queueName is "q-jobs.fifo"; expected a name not ending in ".fifo" because fifo is false/,
      ],
    ])('rejects %j with the value received and expected', (overrides, message) => {
      expect(() => build(overrides)).toThrow(message);
    });
  });
});
