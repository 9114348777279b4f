// Tests of shared/resources.ts live beside the stack tests: the names exist for the stack's sake.
import { describe, expect, it } from 'vitest';
import {
  InvalidResourcePrefixError,
  KEY_ATTRIBUTES,
  resourceNames,
  TTL_ATTRIBUTE,
} from '../../shared/resources.ts';

describe('Function: resourceNames', () => {
  it('derives queue and table names from the prefix', () => {
    // Act
    const names = resourceNames('leaseq-dev');

    // Assess
    expect(names).toEqual({
      prefix: 'leaseq-dev',
      queues: { jobs: 'leaseq-dev-jobs', dlq: 'leaseq-dev-jobs-dlq' },
      tables: {
        jobs: { name: 'leaseq-dev-jobs', partitionKey: 'dedupKey', ttlAttribute: 'expiresAt' },
        leases: { name: 'leaseq-dev-leases', partitionKey: 'leaseKey', ttlAttribute: 'expiresAt' },
      },
    });
    expect(KEY_ATTRIBUTES).toEqual({ jobs: 'dedupKey', leases: 'leaseKey' });
    expect(TTL_ATTRIBUTE).toBe('expiresAt');
  });

  it('appends .fifo to queue names (not table names) for FIFO', () => {
    const names = resourceNames('p', { fifo: true });
    expect(names.queues).toEqual({ jobs: 'p-jobs.fifo', dlq: 'p-jobs-dlq.fifo' });
    expect(names.tables.jobs.name).toBe('p-jobs');
  });

  it('accepts the longest prefix that keeps every queue name within 80 characters', () => {
    const prefix = 'a'.repeat(66);
    const names = resourceNames(prefix, { fifo: true });
    expect(names.queues.dlq).toHaveLength(80);
  });

  it.each(['', '-leading-dash', 'has space', 'dot.ted', 'a'.repeat(67), 'sl/ash'])(
    'rejects prefix %j with the value and the rule',
    (prefix) => {
      expect(() => resourceNames(prefix)).toThrow(InvalidResourcePrefixError);
      expect(() => resourceNames(prefix)).toThrow(
        `Invalid resource prefix ${JSON.stringify(prefix)}: expected`,
      );
    },
  );
});
