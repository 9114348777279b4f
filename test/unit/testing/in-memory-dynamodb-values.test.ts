import { PutCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { describe, expect, it } from 'vitest';
import type { Effect } from '../../../shared/core/contract/job-store.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { versionedPut } from '../../../shared/core/decisions/optimistic.ts';
import { parseCondition, parseUpdate } from '../../../shared/testing/dynamodb-expressions.ts';
import { InMemoryDynamoDb } from '../../../shared/testing/in-memory-dynamodb/client.ts';
import { memoryStores } from '../../support/memory-stores.ts';

const LEDGER = 'ledger';

// The expression engine InMemoryDynamoDb evaluates conditions and updates with, and the values the
// document client refuses before a request leaves (moved from the tests of the hand-written twins).

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
  const doc = () =>
    new InMemoryDynamoDb({ tables: [{ name: 't', partitionKey: { name: 'pk', type: 'S' } }] });
  const numbered = () =>
    new InMemoryDynamoDb({ tables: [{ name: 't', partitionKey: { name: 'pk', type: 'N' } }] });
  const setTo = (value: unknown, pk: unknown = 'a') =>
    new UpdateCommand({
      TableName: 't',
      Key: { pk },
      UpdateExpression: 'SET s = :x',
      ExpressionAttributeValues: { ':x': value },
    });

  it('refuses an empty set anywhere in a request, and writes nothing (DynamoDB has no empty sets)', async () => {
    const client = doc();
    const cases = [
      setTo(new Set()),
      setTo({ nested: [new Set()] }),
      new PutCommand({ TableName: 't', Item: { pk: 'b', s: new Set() } }),
      new TransactWriteCommand({
        TransactItems: [{ Put: { TableName: 't', Item: { pk: 'c', s: new Set() } } }],
      }),
    ];
    for (const command of cases) {
      await expect(client.send(command as never)).rejects.toThrow(/Pass a non-empty set/);
    }
    expect(client.items('t')).toEqual([]);
  });

  it('refuses a number past Number.MAX_SAFE_INTEGER and NaN, as lib-dynamodb does', async () => {
    const client = doc();
    await expect(client.send(setTo(2 ** 60))).rejects.toThrow(/greater than Number.MAX_SAFE_INTEGER/);
    await expect(client.send(setTo(Number.NaN))).rejects.toThrow(/Special numeric value NaN/);
    expect(client.items('t')).toEqual([]);
    await client.send(setTo(2n ** 60n));
    expect(client.items('t')[0]?.s).toBe(2n ** 60n);
  });

  // The document client takes a map for a class instance when its `constructor` is not Object's, and an
  // own attribute named `constructor` (a payload's or a result's field, JSON.parse keeps it) hides Object's.
  it('refuses or takes each odd value as lib-dynamodb marshall does (a map with a constructor field too)', async () => {
    const options = { removeUndefinedValues: true, convertClassInstanceToMap: false } as const;
    const cases: Record<string, unknown> = {
      'a constructor field': { constructor: 'Acme' },
      'a constructor field, parsed': JSON.parse('{"n":{"constructor":"Acme"}}'),
      'a constructor field in a list': [{ constructor: 1 }],
      'a constructor field that is null': { constructor: null },
      'a null-prototype map': Object.assign(Object.create(null), { x: 1 }),
      'a null-prototype map with a constructor field': Object.assign(Object.create(null), {
        constructor: 'x',
      }),
      '-0': -0,
      'a sparse list': new Array<number>(3).fill(1, 0, 1).fill(2, 2),
      'undefined in a list': [1, undefined],
      'undefined in a map': { a: undefined },
      'a toJSON method': { toJSON: () => 1 },
      'a Map': new Map([['x', 1]]),
      'a Date': new Date(0),
      'a Buffer': Buffer.from('x'),
    };
    for (const [name, value] of Object.entries(cases)) {
      const marshalled = (() => {
        try {
          marshall({ ':x': value }, options);
          return 'taken';
        } catch (error) {
          return `refused: ${(error as Error).message}`;
        }
      })();
      const sent = await doc()
        .send(setTo(value))
        .then(
          () => 'taken',
          (error: Error) => `refused: ${error.message}`,
        );
      expect({ name, sent }).toEqual({ name, sent: marshalled });
    }
  });

  it('stores a bigint as DynamoDB does: a small one reads back as a number, and keys it by value', async () => {
    const client = numbered();
    await client.send(new PutCommand({ TableName: 't', Item: { pk: 7n, n: 5n, l: [1n] } }));
    expect(client.items('t')).toEqual([{ pk: 7, n: 5, l: [1] }]);
    await client.send(setTo(1, 7n));
    expect(client.items('t')).toEqual([{ pk: 7, n: 5, l: [1], s: 1 }]);
  });
});

describe('Effects DynamoDB refuses, committed through the job store', () => {
  it('refuses each, and writes nothing', async () => {
    // Prepare
    const { store, row } = memoryStores({ tables: { [LEDGER]: 'account' } });
    const claimed = await store.claim({
      dedupKey: 'unsupported',
      owner: 'w',
      messageId: 'm',
      type: 'unit',
      createdAt: new Date().toISOString(),
      leaseMs: 30_000,
      now: Date.now(),
    });
    if (!claimed.claimed) throw new Error('expected a claim');
    const ok = versionedPut({
      tableName: LEDGER,
      key: { account: 'a' },
      seenVersion: undefined,
      item: { balance: 1 },
    });
    // Account b and c: an operation on `ok`'s item would be refused first, as the same item twice.
    const put = { ...(ok.Put ?? { TableName: LEDGER, Item: {} }) };
    put.Item = { ...put.Item, account: 'c' };
    const b = { TableName: LEDGER, Key: { account: 'b' } };
    const cases: [Effect, RegExp][] = [
      [
        { Update: { ...b, UpdateExpression: 'SET b = :b' } },
        /attribute value used in expression is not defined/,
      ],
      [{ Update: { ...b, UpdateExpression: 'SET #n = :n', ExpressionAttributeValues: { ':n': 1 } } }, /#n/],
      [
        { Update: { ...b, UpdateExpression: 'SET n = :n', ExpressionAttributeValues: { ':n': 1, ':x': 2 } } },
        /unused/,
      ],
      [
        { Update: { ...b, UpdateExpression: 'SET account = :n', ExpressionAttributeValues: { ':n': 'c' } } },
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
      [
        { ConditionCheck: { ...b, ConditionExpression: 'x' } },
        /comparison or function expected|Syntax error/,
      ],
      [{ Put: { ...put, ConditionExpression: 'attribute_exists(#k) AND' } }, /ends too early|Syntax error/],
      [{ Put: { ...put, TableName: 'other' } }, /not found/],
      [{ Put: { ...put, Item: { balance: 1 } } }, /Missing the key account/],
      [{ Delete: { TableName: LEDGER, Key: { account: 'b', sk: 1 } } }, /does not match the schema/],
    ];

    // Act + Assess
    for (const [effect, message] of cases) {
      await expect(store.complete(claimed.lease, 'x', [ok, effect]), JSON.stringify(effect)).rejects.toThrow(
        message,
      );
    }
    await expect(store.complete(claimed.lease, 'x', [ok, ok])).rejects.toThrow(/same-item-twice/);
    expect(row(LEDGER, { account: 'a' })).toBeUndefined();
    expect(await store.get('unsupported')).toMatchObject({ status: JobStatus.InProgress, version: 1 });
  });
});
