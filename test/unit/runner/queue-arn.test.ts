import { describe, expect, it } from 'vitest';
import { queueArnFromUrl } from '../../../shared/runner/sqs-records.ts';

describe('Function: queueArnFromUrl', () => {
  it('reads the account and name from AWS and emulator queue URLs', () => {
    expect(queueArnFromUrl('https://sqs.eu-west-1.amazonaws.com/123456789012/jobs.fifo', 'eu-west-1')).toBe(
      'arn:aws:sqs:eu-west-1:123456789012:jobs.fifo',
    );
    expect(queueArnFromUrl('http://127.0.0.1:4566/000000000000/leaseq-jobs', 'us-east-1')).toBe(
      'arn:aws:sqs:us-east-1:000000000000:leaseq-jobs',
    );
  });

  it('falls back to a placeholder account when the URL names only the queue', () => {
    expect(queueArnFromUrl('http://localhost:9324/jobs', 'us-east-1')).toBe(
      'arn:aws:sqs:us-east-1:000000000000:jobs',
    );
  });
});
