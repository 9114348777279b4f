import { describe, expect, it } from 'vitest';
import { checkJobWrite, type JobWrite } from '../../../../shared/core/adapters/dynamodb-limits.ts';
import { type HistoryEvent, PROBLEM_KEYS_UPPER_BYTES } from '../../../../shared/core/contract/job-history.ts';
import type { Effect, JobLease } from '../../../../shared/core/contract/job-store.ts';
import { giveUpError, giveUpWithHistory } from '../../../../shared/core/protocol/give-up.ts';
import { itemBytes, MAX_ITEM_BYTES } from '../../../../shared/core/protocol/item-size.ts';
import { StoreRefusedError } from '../../../../shared/errors.ts';

const KB = 1024;
const put = (account: string, extra: Record<string, unknown> = {}): Effect => ({
  Put: { TableName: 'ledger', Item: { account, ...extra } },
});
const update = (account: string, values: Record<string, unknown> = { ':b': 1 }): Effect => ({
  Update: {
    TableName: 'ledger',
    Key: { account },
    UpdateExpression: 'SET balance = :b',
    ExpressionAttributeValues: values,
  },
});
const fence = (key: string): Effect => ({
  ConditionCheck: {
    TableName: 'leases',
    Key: { leaseKey: key },
    ConditionExpression: '#o = :o',
    ExpressionAttributeNames: { '#o': 'owner' },
    ExpressionAttributeValues: { ':o': 'me' },
  },
});
const write = (effects: Effect[], jobValues: Record<string, unknown> = { result: null }): JobWrite => ({
  operation: 'complete',
  jobValues,
  jobItem: { tableName: 'jobs', key: { dedupKey: 'k' } },
  effects,
});

/** The problem `checkJobWrite` refuses `w` with, or 'ok'. */
function problem(w: JobWrite): string {
  try {
    checkJobWrite(w);
    return 'ok';
  } catch (error) {
    if (!(error instanceof StoreRefusedError)) throw error;
    expect(error.message.startsWith(`${error.problem}: complete: `)).toBe(true);
    return error.problem;
  }
}

describe('Function: checkJobWrite', () => {
  it('counts the job item and named-lease fences against the 100 items of a transaction', () => {
    const puts = (n: number) => Array.from({ length: n }, (_, i) => put(`a${i}`));
    expect(problem(write(puts(99)))).toBe('ok');
    expect(problem(write(puts(100)))).toBe('too-many-items');
    expect(problem(write([...puts(98), fence('lock')]))).toBe('ok');
    expect(problem(write([...puts(99), fence('lock')]))).toBe('too-many-items');
  });

  it('refuses two operations on one item, learning a Put’s key from the keyed operations on its table', () => {
    expect(problem(write([update('a'), update('a')]))).toBe('same-item-twice');
    expect(problem(write([put('a'), update('a')]))).toBe('same-item-twice');
    expect(problem(write([put('a', { b: 1 }), put('a', { b: 2 }), update('c')]))).toBe('same-item-twice');
    // An effect on the job item itself.
    expect(problem(write([{ Delete: { TableName: 'jobs', Key: { dedupKey: 'k' } } }, update('a')]))).toBe(
      'same-item-twice',
    );
    expect(problem(write([put('a'), update('b'), fence('a')]))).toBe('ok');
    // Two Puts on a table no operation names a key of: left to DynamoDB.
    expect(problem(write([put('a'), put('a')]))).toBe('ok');
  });

  it('refuses a job item, an effect item or a transaction over its size, by a lower bound', () => {
    expect(problem(write([], { result: 'r'.repeat(MAX_ITEM_BYTES) }))).toBe('item-too-large');
    expect(problem(write([], { result: 'r'.repeat(MAX_ITEM_BYTES - 100) }))).toBe('ok');
    expect(
      problem(write([], { checkpoint: { data: 'c'.repeat(300 * KB) }, result: 'r'.repeat(150 * KB) })),
    ).toBe('item-too-large');
    expect(problem(write([put('a', { pad: 'p'.repeat(401 * KB) })]))).toBe('item-too-large');
    expect(problem(write([update('a', { ':b': 'u'.repeat(401 * KB) })]))).toBe('item-too-large');
    const big = Array.from({ length: 11 }, (_, i) => put(`a${i}`, { pad: 'p'.repeat(380 * KB) }));
    expect(problem(write(big))).toBe('transaction-too-large');
    expect(problem(write(big.slice(1)))).toBe('ok');
    // A value an update only removes does not count.
    const remove: Effect = {
      Update: {
        TableName: 'ledger',
        Key: { account: 'a' },
        UpdateExpression: 'REMOVE pad DELETE tags :t',
        ExpressionAttributeValues: { ':t': new Set(['x'.repeat(401 * KB)]) },
      },
    };
    expect(problem(write([remove]))).toBe('ok');
  });

  it('refuses what the document client cannot send: undefined expression values or keys, NaN, class instances', () => {
    expect(problem(write([update('a', { ':b': undefined })]))).toBe('bad-value');
    expect(problem(write([{ Delete: { TableName: 'ledger', Key: { account: undefined } } }]))).toBe(
      'bad-value',
    );
    expect(problem(write([put('a', { when: new Date() })]))).toBe('bad-value');
    expect(problem(write([update('a', { ':b': Number.NaN })]))).toBe('bad-value');
    expect(problem(write([], { result: { total: Number.POSITIVE_INFINITY } }))).toBe('bad-value');
    expect(problem(write([], { checkpoint: { data: { run: () => 1 } } }))).toBe('bad-value');
    // Dropped by the client as in JSON (removeUndefinedValues): fine.
    expect(problem(write([put('a', { note: undefined })], { result: { a: undefined, n: [1, null] } }))).toBe(
      'ok',
    );
    expect(
      problem(
        write([put('a', { tags: new Set(['x']), bytes: new Uint8Array(3), n: 10n, m: new Map([['k', 1]]) })]),
      ),
    ).toBe('ok');
  });

  it("refuses a value nested past DynamoDB's 32 levels, or one that holds itself, as a bad value", () => {
    // `wraps` maps and lists around a number: an attribute holds at most 31 (the attribute is level 1).
    const nested = (wraps: number): unknown => {
      let value: unknown = 1;
      for (let i = 0; i < wraps; i++) value = i % 2 === 0 ? { a: value } : [value];
      return value;
    };
    expect(problem(write([], { result: nested(31) }))).toBe('ok');
    expect(problem(write([], { result: nested(32) }))).toBe('bad-value');
    expect(problem(write([put('a', { deep: nested(31) })]))).toBe('ok');
    expect(problem(write([update('a', { ':b': nested(32) })]))).toBe('bad-value');
    const cyclic: Record<string, unknown> = { n: 1 };
    cyclic.self = cyclic;
    expect(problem(write([], { result: { list: [cyclic] } }))).toBe('bad-value');
    expect(() => checkJobWrite(write([], { checkpoint: cyclic }))).toThrow(
      /job item\.checkpoint(\.self){31}\.n nests deeper than DynamoDB's 32 levels/,
    );
  });

  it('names where the bad value is, not what it holds', () => {
    expect(() => checkJobWrite(write([put('a', { nested: { when: new Date() } })]))).toThrow(
      'effect 0.Item.nested.when is a Date',
    );
  });
});

describe('Function: itemBytes', () => {
  it('counts names and values in UTF-8, as DynamoDB does, never more', () => {
    expect(itemBytes({ a: 'xyz' })).toBe(4);
    expect(itemBytes({ é: 'é' })).toBe(4);
    expect(itemBytes({ m: { k: 'v' } })).toBe(1 + 3 + 2);
    expect(itemBytes({ n: 12345 })).toBeLessThanOrEqual(1 + 4);
  });
});

describe('Function: giveUpError', () => {
  const lease = (data?: string): JobLease => ({
    dedupKey: 'k',
    owner: 'w',
    token: 1,
    attempts: 1,
    messageId: 'm',
    version: 1,
    leaseUntil: 0,
    ...(data === undefined ? {} : { checkpoint: { step: 's', done: ['s'], at: 1, data } }),
  });
  const error = { message: `E: ${'e'.repeat(3000)}`, errorClass: 'TransientJobError' };

  it('keeps the usual caps when the item has room', () => {
    const out = giveUpError(lease('small'), error);
    expect(out.message.length).toBe(1000);
    expect(out.errorClass).toBe('TransientJobError');
  });

  it('shortens the text (class first) to what the checkpoint leaves of 400 KB, down to nothing', () => {
    const near = giveUpError(lease('c'.repeat(MAX_ITEM_BYTES - 1500)), error);
    expect(near.errorClass).toBe('TransientJobError');
    expect(near.message.length).toBeGreaterThan(0);
    expect(near.message.length).toBeLessThan(300);
    const full = giveUpError(lease('c'.repeat(MAX_ITEM_BYTES - 200)), error);
    expect(full).toEqual({ message: '', errorClass: '' });
  });
});

describe('Function: giveUpWithHistory', () => {
  const lease = (data: string): JobLease => ({
    dedupKey: 'k',
    owner: 'w',
    token: 1,
    attempts: 1,
    messageId: 'm',
    version: 1,
    leaseUntil: 0,
    checkpoint: { step: 's', done: ['s'], at: 1, data },
  });
  const error = { message: `E: ${'e'.repeat(3000)}`, errorClass: 'TransientJobError' };
  const failed: HistoryEvent = { e: 'failed', at: 1, errorClass: 'E', message: 'e'.repeat(240), retryAt: 2 };

  it('carries the events, and the error as usual, when the item has room', () => {
    expect(giveUpWithHistory(lease('small'), error, [failed])).toEqual({
      error: giveUpError(lease('small'), error),
      withEvents: true,
    });
  });

  it('leaves the events out near 400 KB rather than cut the error text for them', () => {
    const near = lease('c'.repeat(MAX_ITEM_BYTES - 1500));
    const out = giveUpWithHistory(near, error, [failed]);
    expect(out.withEvents).toBe(false);
    // The room of the `problems` index keys, which the write carries with or without the events, is kept.
    expect(out.error).toEqual(giveUpError(near, error, PROBLEM_KEYS_UPPER_BYTES));
    expect(out.error.message.length).toBeGreaterThan(0);
  });
});
