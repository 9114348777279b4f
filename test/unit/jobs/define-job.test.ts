import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { JobRegistry } from '../../../shared/core/model/registry.ts';
import { payloadProblem, validatePayload } from '../../../shared/core/model/standard-schema.ts';
import {
  defineTable,
  tableEnvVar,
  tableOutputKey,
  tablePhysicalName,
} from '../../../shared/core/model/table.ts';
import { ConfigError } from '../../../shared/errors.ts';
import { defineJob, defineJobs } from '../../../shared/jobs/define-job.ts';

const noop = async () => undefined;

describe('Function: defineTable', () => {
  it('derives the environment variable, stack output and physical name from the camelCase name', () => {
    expect(tableEnvVar('emailLog')).toBe('LEASEQ_TABLE_EMAIL_LOG');
    expect(tableOutputKey('emailLog')).toBe('EmailLogTableName');
    expect(tablePhysicalName('shop', 'emailLog')).toBe('shop-email-log');
    expect(tableOutputKey('ledger')).toBe('LedgerTableName');
  });

  it.each(['Ledger', 'email_log', 'email-log', '', 'x'.repeat(41)])(
    'refuses the name %j, saying what it expects',
    (name) => {
      expect(() => defineTable(name, { partitionKey: 'id' })).toThrow(ConfigError);
      expect(() => defineTable(name, { partitionKey: 'id' })).toThrow(/expected camelCase/);
    },
  );

  it.each(['jobs', 'leases'])("refuses %j, the name of one of leaseq's own tables", (name) => {
    expect(() => defineTable(name, { partitionKey: 'id' })).toThrow(/is leaseq's own/);
  });
});

describe('Function: defineJobs', () => {
  const ledger = defineTable('ledger', { partitionKey: 'account' });

  it('collects the types and each table once', () => {
    const jobs = defineJobs([
      defineJob({ type: 'a.one', payload: z.object({}), tables: { ledger }, run: noop }),
      defineJob({ type: 'a.two', payload: z.object({}), tables: { books: ledger }, run: noop }),
    ]);
    expect(jobs.types()).toEqual(['a.one', 'a.two']);
    expect(jobs.tables()).toEqual([ledger]);
  });

  it('refuses a duplicate type, a malformed type, a payload that is not a schema and one table declared two ways', () => {
    const job = defineJob({ type: 'a.one', payload: z.object({}), run: noop });
    expect(() => defineJobs([job, job])).toThrow('job type a.one is already registered');
    expect(() => defineJobs([defineJob({ type: 'has space', payload: z.object({}), run: noop })])).toThrow(
      /job type "has space" is not valid; expected 1-128 letters/,
    );
    expect(() => defineJobs([{ type: 'a.x', payload: { parse: () => 1 }, run: noop } as never])).toThrow(
      /payload must be a Standard Schema/,
    );
    const other = defineTable('ledger', { partitionKey: 'id' });
    expect(() =>
      defineJobs([
        defineJob({ type: 'a.one', payload: z.object({}), tables: { ledger }, run: noop }),
        defineJob({ type: 'a.two', payload: z.object({}), tables: { ledger: other }, run: noop }),
      ]),
    ).toThrow(/table ledger is declared twice with different keys/);
    expect(() =>
      defineJobs([{ type: 'a.fast', payload: z.object({}), fastPath: 'yes', run: noop } as never]),
    ).toThrow('job type a.fast: fastPath must be true or false, received string');
    for (const [bad, said] of [
      [0, '0'],
      [1.5, '1.5'],
      [-3, '-3'],
      [Number.NaN, 'NaN'],
      ['1h', 'string'],
    ] as const) {
      expect(() =>
        defineJobs([{ type: 'a.dead', payload: z.object({}), deadKeyTtl: bad, run: noop } as never]),
      ).toThrow(
        `job type a.dead: deadKeyTtl must be a whole number of seconds from 1 to 315360000 (10 years), received ${said}`,
      );
    }
    expect(
      defineJobs([defineJob({ type: 'a.dead', payload: z.object({}), deadKeyTtl: 86_400, run: noop })]).get(
        'a.dead',
      )?.deadKeyTtl,
    ).toBe(86_400);
  });
});

describe('Method: JobRegistry.from', () => {
  it("takes another copy's registry by its shape (a monorepo with two installs of leaseq)", () => {
    const job = defineJob({ type: 'a.one', payload: z.object({}), run: noop });
    const foreign = { types: () => ['a.one'], get: (type: string) => (type === 'a.one' ? job : undefined) };
    expect(JobRegistry.from(foreign).types()).toEqual(['a.one']);
    const own = defineJobs([job]);
    expect(JobRegistry.from(own)).toBe(own);
    expect(JobRegistry.from([job]).types()).toEqual(['a.one']);
  });

  it('checks a table written by hand as defineTable would', () => {
    const job = (table: unknown) =>
      defineJob({ type: 'a.one', payload: z.object({}), tables: { t: table as never }, run: noop });
    expect(() => defineJobs([job({ name: 'jobs', partitionKey: 'id' })])).toThrow(/is leaseq's own/);
    expect(() => defineJobs([job({ name: 'email-log', partitionKey: 'id' })])).toThrow(/expected camelCase/);
    expect(() => defineJobs([job(undefined)])).toThrow(/a table must come from defineTable/);
  });
});

describe('Function: validatePayload', () => {
  const schema = z.object({ to: z.string().email(), n: z.number().int() });

  it('returns the parsed payload, or the first problem with its path', async () => {
    expect(await validatePayload(schema, { to: 'a@b.co', n: 1 })).toEqual({
      ok: true,
      value: { to: 'a@b.co', n: 1 },
    });
    const bad = await validatePayload(schema, { to: 'a@b.co', n: 1.5 });
    expect(bad).toEqual({ ok: false, problem: expect.stringMatching(/^payload\.n: /) });
    expect(payloadProblem(schema, { to: 'nope', n: 1 })).toMatch(/^payload\.to: /);
    expect(payloadProblem(schema, { to: 'a@b.co', n: 2 })).toBeUndefined();
  });
});
