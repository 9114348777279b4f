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

  it('reads every URL shape LocalStack, MiniStack and moto hand out, including hosts a URL parser refuses', () => {
    // LocalStack's `sqs.<region>.<host>` form names an IPv4 address after a region: not a valid URL host.
    expect(queueArnFromUrl('http://sqs.us-east-1.127.0.0.1:4842/000000000000/jobs', 'us-east-1')).toBe(
      'arn:aws:sqs:us-east-1:000000000000:jobs',
    );
    expect(
      queueArnFromUrl(
        'http://sqs.eu-west-1.localhost.localstack.cloud:4566/000000000000/jobs.fifo',
        'eu-west-1',
      ),
    ).toBe('arn:aws:sqs:eu-west-1:000000000000:jobs.fifo');
    expect(
      queueArnFromUrl(
        'http://localhost.localstack.cloud:4566/queue/us-east-1/000000000000/jobs',
        'us-east-1',
      ),
    ).toBe('arn:aws:sqs:us-east-1:000000000000:jobs');
    expect(queueArnFromUrl('https://sqs.us-east-1.amazonaws.com/123456789012/jobs?x=1', 'us-east-1')).toBe(
      'arn:aws:sqs:us-east-1:123456789012:jobs',
    );
  });

  it('says what is wrong with a value that is no queue URL', () => {
    expect(() => queueArnFromUrl('jobs', 'us-east-1')).toThrow(
      /^not a queue URL \(expected http\(s\):\/\/<host>\/<account>\/<name>\): "jobs"$/,
    );
  });
});
