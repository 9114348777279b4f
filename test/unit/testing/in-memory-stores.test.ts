import { describe, expect, it } from 'vitest';
import type { Checkpoint } from '../../../shared/core/contract/job-item.ts';
import type { ClaimRequest, Effect, JobLease } from '../../../shared/core/contract/job-store.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { versionedPut } from '../../../shared/core/decisions/optimistic.ts';
import { LeaseLostError, StoreUnavailableError } from '../../../shared/errors.ts';
import { parseCondition, parseUpdate } from '../../../shared/testing/dynamodb-expressions.ts';
import { InMemoryEffectApplier } from '../../../shared/testing/in-memory-effects.ts';
import { InMemoryJobStore } from '../../../shared/testing/in-memory-job-store.ts';
import { InMemoryLeaseStore } from '../../../shared/testing/in-memory-lease-store.ts';
import { InMemoryRateStore } from '../../../shared/testing/in-memory-rate-store.ts';
import { jobStoreContract } from '../../support/contracts/job-store-contract.ts';
import { leaseStoreContract } from '../../support/contracts/lease-store-contract.ts';
import { rateStoreContract } from '../../support/contracts/rate-store-contract.ts';

const LEDGER = 'ledger';

function ledgerPut(account: string, seenVersion: number | undefined, balance: number): Effect {
  return versionedPut({ tableName: LEDGER, key: { account }, seenVersion, item: { balance } });
}

jobStoreContract('InMemoryJobStore', async () => {
  const effects = new InMemoryEffectApplier({ tables: { [LEDGER]: ['account'] } });
  const store = new InMemoryJobStore({ effects });
  return {
    store,
    ledgerPut,
    ledgerGet: async (account) =>
      effects.get(LEDGER, { account }) as { balance: number; version: number } | undefined,
    deleteItem: async (dedupKey) => {
      store.delete(dedupKey);
    },
    cleanup: () => {},
  };
});

leaseStoreContract('InMemoryLeaseStore', async () => {
  const store = new InMemoryLeaseStore();
  return {
    store,
    deleteItem: async (key) => {
      store.delete(key);
    },
    cleanup: () => {},
  };
});

rateStoreContract('InMemoryRateStore', async () => {
  const store = new InMemoryRateStore();
  return {
    // One store in one process: every client is the same store.
    clients: (n) => Array.from({ length: n }, () => store),
    storedGrants: async (key) => (store.grants(key).length > 0 ? store.grants(key) : undefined),
    cleanup: () => {},
  };
});

function request(dedupKey: string, owner = 'worker-a', now = Date.now()): ClaimRequest {
  return {
    dedupKey,
    owner,
    messageId: `m-${owner}`,
    type: 'unit',
    createdAt: new Date(now).toISOString(),
    leaseMs: 10_000,
    now,
  };
}

async function claim(store: InMemoryJobStore, req: ClaimRequest): Promise<JobLease> {
  const result = await store.claim(req);
  if (!result.claimed) throw new Error('expected a claim');
  return result.lease;
}

/** Pushes into a list the types call readonly, as a careless caller might. */
function scribble(list: readonly string[] | undefined): void {
  if (list === undefined) throw new Error('expected a list to scribble on');
  (list as string[]).push('mutated');
}

function storeWithLedger() {
  const effects = new InMemoryEffectApplier({ tables: { [LEDGER]: ['account'] } });
  return { effects, store: new InMemoryJobStore({ effects }) };
}

describe('Class: InMemoryJobStore', () => {
  describe('Copies', () => {
    it('never lets a caller change stored state through an object it passed in or got back', async () => {
      // Prepare
      const store = new InMemoryJobStore();
      const lease = await claim(store, request('copies'));
      const data = { lines: ['a'] };
      const checkpoint: Checkpoint = { step: 's', done: ['s'], data, at: 1 };
      const result = { total: 1 };
      await store.checkpoint(lease, checkpoint);

      // Act: mutate everything the caller holds.
      data.lines.push('mutated');
      scribble(checkpoint.done);
      const read = await store.get('copies');
      scribble(read?.checkpoint?.done);
      scribble(lease.checkpoint?.done);
      await store.complete(lease, result);
      result.total = 99;
      const done = await store.get('copies');
      (done?.result as { total: number }).total = 42;

      // Assess
      const item = await store.get('copies');
      expect(item?.checkpoint).toEqual({ step: 's', done: ['s'], data: { lines: ['a'] }, at: 1 });
      expect(item?.result).toEqual({ total: 1 });
    });

    it('hands a refusal and a takeover their own copies of the stored item', async () => {
      const store = new InMemoryJobStore();
      const t0 = Date.now();
      const a = await claim(store, request('refusal', 'worker-a', t0));
      await store.checkpoint(a, { step: 's', done: ['s'], at: t0 });
      const refused = await store.claim(request('refusal', 'worker-b', t0 + 1));
      if (!refused.claimed) scribble(refused.existing.checkpoint?.done);
      const taken = await store.claim(request('refusal', 'worker-b', a.leaseUntil + 1));
      if (taken.claimed) {
        scribble(taken.previous?.checkpoint?.done);
        scribble(taken.lease.checkpoint?.done);
      }
      expect((await store.get('refusal'))?.checkpoint?.done).toEqual(['s']);
    });
  });

  describe('Faults', () => {
    it('fails the next call with StoreUnavailableError and writes nothing', async () => {
      // Prepare
      const store = new InMemoryJobStore();
      store.faults.failNext('claim');

      // Act
      const error = await store.claim(request('outage')).catch((e: unknown) => e);

      // Assess
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as StoreUnavailableError).operation).toBe('claim');
      expect(await store.get('outage')).toBeUndefined();
      expect(store.faults.injected.get('claim')).toBe(1);
      expect(store.faults.pending).toBe(0);
      expect((await store.claim(request('outage'))).claimed).toBe(true);
    });

    it('fails only the chosen operation, as many times as asked, with the error given', async () => {
      const store = new InMemoryJobStore();
      const lease = await claim(store, request('renewals'));
      const custom = new Error('custom');
      store.faults.failNext('renew', custom, { times: 2 });

      expect(await store.get('renewals')).toBeDefined();
      await expect(store.renew(lease, 1000, Date.now())).rejects.toBe(custom);
      await expect(store.renew(lease, 1000, Date.now())).rejects.toBe(custom);
      await store.renew(lease, 1000, Date.now());
      expect(store.faults.injected.get('renew')).toBe(2);
    });

    it("fails every operation with '*', in the order the rules were added, until cleared", async () => {
      const store = new InMemoryJobStore();
      store.faults.failNext('*', (op) => new Error(`first ${op}`)).failNext('*', undefined, { times: 5 });

      await expect(store.get('x')).rejects.toThrow('first get');
      await expect(store.resetForRedrive('x', Date.now())).rejects.toBeInstanceOf(StoreUnavailableError);
      expect(store.faults.pending).toBe(4);
      store.faults.clear();
      expect(await store.get('x')).toBeUndefined();
    });

    it("'after' applies the write and loses the answer: a retried completion learns it completed", async () => {
      // Prepare
      const { store, effects } = storeWithLedger();
      const lease = await claim(store, request('lost-answer'));
      store.faults.failNext('complete', undefined, { when: 'after' });

      // Act
      const error = await store
        .complete(lease, 'ok', [ledgerPut('acct', undefined, 5)])
        .catch((e: unknown) => e);
      const retry = await store
        .complete(lease, 'ok', [ledgerPut('acct', undefined, 5)])
        .catch((e: unknown) => e);

      // Assess: the first commit landed (effect included); the lease object never saw it succeed.
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(lease.version).toBe(1);
      expect(await store.get('lost-answer')).toMatchObject({ status: JobStatus.Completed, version: 2 });
      expect(effects.get(LEDGER, { account: 'acct' })).toEqual({ account: 'acct', balance: 5, version: 1 });
      expect(retry).toBeInstanceOf(LeaseLostError);
      expect((retry as LeaseLostError).completedByThisLease).toBe(true);
    });

    it("'after' on a refused write still reports the outage, not the refusal", async () => {
      const store = new InMemoryJobStore();
      const lease = await claim(store, request('refused'));
      await store.complete({ ...lease }, 'ok');
      store.faults.failNext('renew', undefined, { when: 'after' });
      await expect(store.renew(lease, 1000, Date.now())).rejects.toBeInstanceOf(StoreUnavailableError);
    });

    it('rejects a fault count that is not a positive integer', () => {
      expect(() => new InMemoryJobStore().faults.failNext('get', undefined, { times: 0 })).toThrow(
        RangeError,
      );
    });
  });

  describe('Effects', () => {
    it('throws a clear error for effects when built without an applier, and writes nothing', async () => {
      const store = new InMemoryJobStore();
      const lease = await claim(store, request('no-applier'));
      await expect(store.complete(lease, 'x', [ledgerPut('a', undefined, 1)])).rejects.toThrow(
        /without an effect applier/,
      );
      expect((await store.get('no-applier'))?.status).toBe(JobStatus.InProgress);
    });

    it('refuses effects DynamoDB would refuse, and writes nothing', async () => {
      // Prepare
      const { store, effects } = storeWithLedger();
      const lease = await claim(store, request('unsupported'));
      const ok = ledgerPut('a', undefined, 1);
      const put = ok.Put ?? { TableName: LEDGER, Item: {} };
      const b = { TableName: LEDGER, Key: { account: 'b' } };
      const cases: [Effect, RegExp][] = [
        // Account b: an operation on `ok`'s item would be refused first, as the same item twice.
        [
          { Update: { ...b, UpdateExpression: 'SET b = :b' } },
          /attribute value used in expression is not defined/,
        ],
        [{ Update: { ...b, UpdateExpression: 'SET #n = :n', ExpressionAttributeValues: { ':n': 1 } } }, /#n/],
        [
          {
            Update: { ...b, UpdateExpression: 'SET n = :n', ExpressionAttributeValues: { ':n': 1, ':x': 2 } },
          },
          /unused/,
        ],
        [
          {
            Update: { ...b, UpdateExpression: 'SET account = :n', ExpressionAttributeValues: { ':n': 'c' } },
          },
          /part of the key/,
        ],
        [
          {
            Update: {
              ...b,
              UpdateExpression: 'SET balance = balance + :n',
              ExpressionAttributeValues: { ':n': 1 },
            },
          },
          /does not exist/,
        ],
        [{ ConditionCheck: { ...b, ConditionExpression: 'x' } }, /comparison or function expected/],
        [{ Put: { ...put, ConditionExpression: 'attribute_exists(#k) AND' } }, /ends too early/],
        [{ Put: { ...put, Expected: {} } as never }, /unsupported Put fields Expected/],
        [{ Put: { ...put, TableName: 'other' } }, /no table other/],
        [{ Put: { ...put, Item: { balance: 1 } } }, /lacks its key attribute account/],
        [{ Delete: { TableName: LEDGER, Key: { account: 'b', sk: 1 } } }, /does not match the schema/],
      ];

      // Act + Assess
      for (const [effect, message] of cases) {
        await expect(store.complete(lease, 'x', [ok, effect])).rejects.toThrow(message);
      }
      await expect(store.complete(lease, 'x', [ok, ok])).rejects.toThrow(/more than once/);
      expect(effects.get(LEDGER, { account: 'a' })).toBeUndefined();
      expect(await store.get('unsupported')).toMatchObject({ status: JobStatus.InProgress, version: 1 });
    });

    it('applies puts, updates, deletes and condition checks as one transaction', () => {
      const effects = new InMemoryEffectApplier({ tables: { [LEDGER]: ['account'] } });
      effects.put(LEDGER, { account: 'a', balance: 10, tags: new Set(['x']) });
      effects.put(LEDGER, { account: 'gone', balance: 1 });
      const update = (
        account: string,
        expression: string,
        values: Record<string, unknown>,
        condition?: string,
      ): Effect => ({
        Update: {
          TableName: LEDGER,
          Key: { account },
          UpdateExpression: expression,
          ExpressionAttributeValues: values,
          ...(condition ? { ConditionExpression: condition } : {}),
        },
      });

      // A failed condition anywhere applies nothing.
      expect(
        effects.apply([
          update('a', 'ADD balance :n', { ':n': 5 }),
          {
            ConditionCheck: {
              TableName: LEDGER,
              Key: { account: 'gone' },
              ConditionExpression: 'balance > :min',
              ExpressionAttributeValues: { ':min': 1 },
            },
          },
        ]),
      ).toEqual({ ok: false, index: 1 });
      expect(effects.get(LEDGER, { account: 'a' })?.balance).toBe(10);

      expect(
        effects.apply(
          [
            update(
              'a',
              'SET balance = balance - :n, #h = list_append(if_not_exists(#h, :empty), :e) ADD tags :t REMOVE gone',
              { ':n': 3, ':empty': [], ':e': ['debit'], ':t': new Set(['y']) },
              'balance >= :n',
            ),
            {
              Delete: {
                TableName: LEDGER,
                Key: { account: 'gone' },
                ConditionExpression: 'attribute_exists(account)',
              },
            },
            update('new', 'SET balance = if_not_exists(balance, :zero) + :n', { ':zero': 0, ':n': 2 }),
            {
              Put: {
                TableName: LEDGER,
                Item: { account: 'p', v: 1 },
                ConditionExpression: 'attribute_not_exists(account)',
              },
            },
          ].map((e) =>
            e.Update?.UpdateExpression?.includes('#h')
              ? { Update: { ...e.Update, ExpressionAttributeNames: { '#h': 'history' } } }
              : e,
          ) as Effect[],
        ),
      ).toEqual({ ok: true });
      expect(effects.items(LEDGER)).toEqual([
        { account: 'a', balance: 7, history: ['debit'], tags: new Set(['x', 'y']) },
        { account: 'new', balance: 2 },
        { account: 'p', v: 1 },
      ]);
    });

    it('applies a version check against seeded state', () => {
      const effects = new InMemoryEffectApplier({ tables: { [LEDGER]: ['account'] } });
      effects.put(LEDGER, { account: 'a', balance: 10, version: 3 });
      expect(effects.apply([ledgerPut('a', 2, 0)])).toEqual({ ok: false, index: 0 });
      expect(effects.apply([ledgerPut('a', undefined, 0)])).toEqual({ ok: false, index: 0 });
      expect(effects.apply([ledgerPut('a', 3, 20)])).toEqual({ ok: true });
      expect(effects.get(LEDGER, { account: 'a' })).toEqual({ account: 'a', balance: 20, version: 4 });
    });

    it('validates table definitions', () => {
      expect(() => new InMemoryEffectApplier({ tables: { t: [] } })).toThrow(RangeError);
    });
  });
});

// Where the in-memory tables once disagreed with DynamoDB (the emulator agreed with DynamoDB on each).
describe('DynamoDB expressions in memory', () => {
  const update = (expression: string, values: Record<string, unknown>, item: Record<string, unknown>) =>
    parseUpdate(expression, { values })({ pk: 'a', ...item });

  describe('Numbers are decimals', () => {
    it('adds 0.1 and 0.2 to 0.3, with SET and with ADD', () => {
      expect(update('SET n = n + :x', { ':x': 0.2 }, { n: 0.1 }).n).toBe(0.3);
      expect(update('ADD n :x', { ':x': 0.2 }, { n: 0.1 }).n).toBe(0.3);
      expect(update('SET n = n - :x', { ':x': 0.1 }, { n: 0.3 }).n).toBe(0.2);
    });

    it('adds bigints exactly and reads the result back as lib-dynamodb does', () => {
      // 2^53 + 1 is past a double's precision: as a number it would add to 2^53 + 2 by luck or lose it.
      expect(update('SET n = n + :x', { ':x': 1 }, { n: 9007199254740993n }).n).toBe(9007199254740994n);
      expect(update('ADD n :x', { ':x': 2n }, { n: 9007199254740993n }).n).toBe(9007199254740995n);
      // A bigint result that fits a number comes back as a number, as a read would return it.
      expect(update('SET n = n - :x', { ':x': 1n }, { n: 9007199254740992n }).n).toBe(9007199254740991);
      expect(update('SET n = n + :x', { ':x': 0.5 }, { n: 1n }).n).toBe(1.5);
    });

    it('compares a bigint and a number by value', () => {
      const equal = parseCondition('n = :x', { values: { ':x': 5 } });
      expect(equal({ pk: 'a', n: 5n })).toBe(true);
      expect(parseCondition('n < :x', { values: { ':x': 9007199254740993n } })({ pk: 'a', n: 2 ** 53 })).toBe(
        true,
      );
    });

    it('refuses a result past 38 significant digits, as DynamoDB does', () => {
      expect(() => update('ADD n :x', { ':x': 1e-30 }, { n: 1e10 })).toThrow(/38 significant digits/);
    });
  });

  it.each(['total', 'source', 'owner', 'comment', 'items', 'region', 'counter', 'result', 'old', 'Status'])(
    'refuses the reserved word %s as a bare attribute name',
    (word) => {
      expect(() => parseUpdate(`SET ${word} = :x`, { values: { ':x': 1 } })).toThrow(
        `reserved keyword: ${word}`,
      );
      expect(() => parseCondition(`attribute_exists(m.${word})`, {})).toThrow(/reserved keyword/);
      // Written as a #placeholder it is fine.
      expect(
        parseUpdate('SET #w = :x', { names: { '#w': word }, values: { ':x': 1 } })({ pk: 'a' })[word],
      ).toBe(1);
    },
  );

  it('refuses if_not_exists and list_append in a condition, as DynamoDB does', () => {
    for (const fn of ['if_not_exists(a, :x) = :x', 'list_append(a, :x) = :x']) {
      expect(() => parseCondition(fn, { values: { ':x': 1 } })).toThrow(
        /not allowed in a condition expression/,
      );
    }
  });

  it('refuses condition functions in an update, as DynamoDB does', () => {
    expect(() => parseUpdate('SET n = size(s)', {})).toThrow(
      /not allowed in an update expression; function: size/,
    );
    expect(() => parseUpdate('SET n = attribute_exists(s)', {})).toThrow(
      /not allowed in an update expression/,
    );
  });

  // AWS's guide ("Removing elements from a list"): REMOVE RelatedItems[1], RelatedItems[2] on five
  // elements removes the second and third, and the rest shift down. The emulator removes [1], then [2]
  // of what is left (the third and fourth), so the agreement test on the emulator cannot cover this.
  it('removes several list elements by their original indices, as AWS documents', () => {
    const l = ['Chisel', 'Hammer', 'Nails', 'Screwdriver', 'Hacksaw'];
    expect(update('REMOVE l[1], l[2]', {}, { l }).l).toEqual(['Chisel', 'Screwdriver', 'Hacksaw']);
    expect(update('REMOVE l[2], l[1]', {}, { l }).l).toEqual(['Chisel', 'Screwdriver', 'Hacksaw']);
    expect(update('SET l[1] = :x REMOVE l[0]', { ':x': 'Mallet' }, { l }).l).toEqual([
      'Mallet',
      'Nails',
      'Screwdriver',
      'Hacksaw',
    ]);
  });

  it('refuses BETWEEN with its bounds reversed, whatever the item holds', () => {
    expect(() => parseCondition('a BETWEEN :hi AND :lo', { values: { ':hi': 9, ':lo': 1 } })).toThrow(
      /BETWEEN operator requires upper bound to be greater than or equal to lower bound/,
    );
    expect(() => parseCondition('a BETWEEN :hi AND :lo', { values: { ':hi': 'b', ':lo': 'a' } })).toThrow(
      /BETWEEN/,
    );
    const inRange = parseCondition('a BETWEEN :lo AND :hi', { values: { ':hi': 9, ':lo': 1 } });
    expect(inRange({ pk: 'a', a: 5 })).toBe(true);
    expect(inRange({ pk: 'a', a: 10 })).toBe(false);
  });
});

describe('DynamoDB expressions in memory, parsed once', () => {
  // A parse is kept by its text; each use must still be checked against its own placeholders.
  it('reads each use through its own names, and checks its own values, in order', () => {
    const expression = '#a BETWEEN :lo AND :hi AND #b = :v';
    const first = parseCondition(expression, {
      names: { '#a': 'x', '#b': 'y' },
      values: { ':lo': 1, ':hi': 9, ':v': 'ok' },
    });
    expect(first({ pk: 'a', x: 5, y: 'ok' })).toBe(true);
    // The same text with other attributes behind its names reads those.
    const other = parseCondition(expression, {
      names: { '#a': 'p', '#b': 'q' },
      values: { ':lo': 1, ':hi': 9, ':v': 'ok' },
    });
    expect(other({ pk: 'a', x: 5, y: 'ok' })).toBe(false);
    expect(other({ pk: 'a', p: 5, q: 'ok' })).toBe(true);
    // Other values after a use with the same names: reversed bounds are refused, a missing value named,
    // the first in the text first.
    const names = { '#a': 'x', '#b': 'y' };
    parseCondition(expression, { names, values: { ':lo': 1, ':hi': 9, ':v': 'ok' } });
    expect(() => parseCondition(expression, { names, values: { ':lo': 9, ':hi': 1, ':v': 'ok' } })).toThrow(
      /BETWEEN operator requires upper bound/,
    );
    expect(() => parseCondition(expression, { names, values: { ':lo': 1, ':hi': 9 } })).toThrow(
      /attribute value: :v$/,
    );
    expect(() => parseCondition(expression, { names, values: { ':hi': 9 } })).toThrow(
      /attribute value: :lo$/,
    );
    expect(() => parseCondition(expression, { names: { '#a': 'x' }, values: {} })).toThrow(
      /attribute value: :lo$/,
    );
    expect(() =>
      parseCondition(expression, { names: { '#a': 'x' }, values: { ':lo': 1, ':hi': 9, ':v': 'ok' } }),
    ).toThrow(/attribute name: #b$/);
    // And the first use's parse still reads its own.
    expect(
      parseCondition(expression, { names, values: { ':lo': 1, ':hi': 9, ':v': 'ok' } })({
        pk: 'a',
        x: 5,
        y: 'ok',
      }),
    ).toBe(true);
  });

  it('refuses an expression over 4 KB (4096 bytes as sent), as DynamoDB does, so none is kept either', () => {
    const condition = (bytes: number) => `attribute_exists(a${'x'.repeat(bytes - 19)})`;
    expect(Buffer.byteLength(condition(4096))).toBe(4096);
    expect(parseCondition(condition(4096), {})({ pk: 'k' })).toBe(false);
    expect(() => parseCondition(condition(4097), {})).toThrow(
      /Expression size has exceeded the maximum allowed size/,
    );
    const update = `SET ${Array.from({ length: 400 }, (_, i) => `a${i} = :v`).join(', ')}`;
    expect(Buffer.byteLength(update)).toBeGreaterThan(4096);
    expect(() => parseUpdate(update, { values: { ':v': 1 } })).toThrow(
      /Expression size has exceeded the maximum allowed size/,
    );
  });

  it("applies an update through each use's own names and values", () => {
    const expression = 'SET #n = #n + :x';
    expect(parseUpdate(expression, { names: { '#n': 'a' }, values: { ':x': 1 } })({ pk: 'k', a: 1 })).toEqual(
      {
        pk: 'k',
        a: 2,
      },
    );
    expect(
      parseUpdate(expression, { names: { '#n': 'b' }, values: { ':x': 5 } })({ pk: 'k', a: 1, b: 1 }),
    ).toEqual({ pk: 'k', a: 1, b: 6 });
    parseUpdate(expression, { names: { '#n': 'a' }, values: { ':x': 1 } });
    expect(() => parseUpdate(expression, { names: { '#n': 'a' }, values: {} })).toThrow(
      /attribute value: :x$/,
    );
  });
});

describe('Values lib-dynamodb will not send', () => {
  const effects = () => new InMemoryEffectApplier({ tables: { t: ['pk'] } });
  const setTo = (value: unknown): Effect => ({
    Update: {
      TableName: 't',
      Key: { pk: 'a' },
      UpdateExpression: 'SET s = :x',
      ExpressionAttributeValues: { ':x': value },
    },
  });

  it('refuses an empty set anywhere in an effect, and writes nothing (DynamoDB has no empty sets)', () => {
    const applier = effects();
    const cases: Effect[] = [
      setTo(new Set()),
      setTo({ nested: [new Set()] }),
      { Put: { TableName: 't', Item: { pk: 'b', s: new Set() } } },
    ];
    for (const effect of cases) {
      expect(() => applier.apply([effect])).toThrow(/Pass a non-empty set/);
    }
    expect(() => applier.put('t', { pk: 'c', s: new Set() })).toThrow(/Pass a non-empty set/);
    expect(applier.items('t')).toEqual([]);
  });

  it('refuses a number past Number.MAX_SAFE_INTEGER and NaN, as lib-dynamodb does', () => {
    const applier = effects();
    expect(() => applier.apply([setTo(2 ** 60)])).toThrow(/greater than Number.MAX_SAFE_INTEGER/);
    expect(() => applier.apply([setTo(Number.NaN)])).toThrow(/Special numeric value NaN/);
    expect(applier.apply([setTo(2n ** 60n)])).toEqual({ ok: true });
    expect(applier.get('t', { pk: 'a' })?.s).toBe(2n ** 60n);
  });

  it('stores a bigint as DynamoDB does: a small one reads back as a number, and keys it by value', () => {
    const applier = new InMemoryEffectApplier({ tables: { t: ['pk'] } });
    expect(applier.apply([{ Put: { TableName: 't', Item: { pk: 7n, n: 5n, l: [1n] } } }])).toEqual({
      ok: true,
    });
    expect(applier.get('t', { pk: 7 })).toEqual({ pk: 7, n: 5, l: [1] });
    expect(
      applier.apply([setTo(1)].map((e) => ({ Update: { ...e.Update, Key: { pk: 7n } } }) as Effect)),
    ).toEqual({ ok: true });
    expect(applier.items('t')).toEqual([{ pk: 7, n: 5, l: [1], s: 1 }]);
  });
});

describe('Class: InMemoryLeaseStore', () => {
  it('hands out copies: changing a returned item does not change the lease', async () => {
    const store = new InMemoryLeaseStore();
    const now = Date.now();
    await store.tryAcquire('k', 'a', 1000, now);
    const refused = await store.tryAcquire('k', 'b', 1000, now);
    if (!refused.acquired) Object.assign(refused.holder, { owner: 'b' });
    const read = await store.get('k');
    if (read) Object.assign(read, { owner: 'b' });
    expect((await store.get('k'))?.owner).toBe('a');
  });

  it('surfaces an outage during release (only a lost lease is a silent no-op)', async () => {
    // Prepare
    const store = new InMemoryLeaseStore();
    const now = Date.now();
    const acquired = await store.tryAcquire('k', 'a', 1000, now);
    if (!acquired.acquired) throw new Error('expected to acquire');
    store.faults.failNext('lease-release');

    // Act + Assess: still held after the failed release; an 'after' fault releases and still throws.
    await expect(store.release(acquired.lease)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect((await store.get('k'))?.owner).toBe('a');
    store.faults.failNext('lease-release', undefined, { when: 'after' });
    await expect(store.release(acquired.lease)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect((await store.get('k'))?.owner).toBeUndefined();
    await store.release(acquired.lease);
  });

  it('fails acquire with StoreUnavailableError and writes nothing', async () => {
    const store = new InMemoryLeaseStore();
    store.faults.failNext('lease-acquire');
    await expect(store.tryAcquire('k', 'a', 1000, Date.now())).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await store.get('k')).toBeUndefined();
    expect(store.faults.injected.get('lease-acquire')).toBe(1);
  });
});
