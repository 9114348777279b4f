import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CoreEnv, coreEnv, queueCounts } from '../../support/core-fixture.ts';
import { leaseq } from './run-cli.ts';

let env: CoreEnv;
let prefix: string;
// Job files with one body over the default limit (the jobs queue's) and one of 20 KB.
const HUGE = join(tmpdir(), `leaseq-huge-${process.pid}.ndjson`);
const MEDIUM = join(tmpdir(), `leaseq-medium-${process.pid}.ndjson`);
const spec = (bytes: number) =>
  JSON.stringify({ type: 'ledger.credit', payload: { account: 'a', amount: 1, pad: 'x'.repeat(bytes) } });

beforeAll(async () => {
  env = await coreEnv('clibad');
  prefix = env.jobsTable.replace(/-jobs$/, '');
  writeFileSync(HUGE, `${spec(1_100_000)}\n`);
  writeFileSync(MEDIUM, `${spec(20_000)}\n`);
});
afterAll(() => {
  env?.close();
  rmSync(HUGE, { force: true });
  rmSync(MEDIUM, { force: true });
});

describe('Bad input: one line, non-zero exit, no stack trace, nothing sent', () => {
  const cases: [string, string[], RegExp][] = [
    ['unknown command', ['frobnicate'], /^leaseq: unknown command 'frobnicate'$/],
    ['unknown dlq subcommand', ['dlq', 'frob'], /^leaseq: unknown command 'frob'$/],
    ['unknown flag', ['status', '--bogus'], /^leaseq: unknown option '--bogus'$/],
    [
      'negative count',
      ['send', '--count', '-3'],
      /^leaseq: option '--count <n>' argument '-3' is invalid\. expected an integer from 1 to 1000000$/,
    ],
    [
      'duplicate rate above 1',
      ['send', '--duplicates', '2'],
      /^leaseq: option '--duplicates <rate>' argument '2' is invalid\. expected a number from 0 to 1/,
    ],
    [
      'bad rate',
      ['dlq', 'redrive', '--rate', 'fast'],
      /^leaseq: option '--rate <rate>' argument 'fast' is invalid\. expected a positive rate/,
    ],
    [
      'unknown type',
      ['send', '--types', 'ledger.debit'],
      /^leaseq: option '--types <list>' argument 'ledger\.debit' is invalid\. unknown ledger\.debit/,
    ],
    ['bad limit', ['dlq', 'list', '--limit', '0'], /^leaseq: option '--limit <n>' argument '0' is invalid/],
    ['missing argument', ['inspect'], /^leaseq: missing required argument 'dedupKey'$/],
    [
      'missing file',
      ['send', '--file', '/no/such/jobs.ndjson'],
      /^leaseq: cannot read jobs file \/no\/such\/jobs\.ndjson: no such file$/,
    ],
    [
      'a body over the queue limit',
      ['send', '--file', HUGE],
      /^leaseq: .*leaseq-huge-\d+\.ndjson: line 1: body is 1100\d{3} bytes, above the 1015808 byte limit \(maxBodyBytes\); nothing was sent$/,
    ],
    [
      'a body over --max-body-bytes',
      ['send', '--file', MEDIUM, '--max-body-bytes', '10000'],
      /^leaseq: .*: line 1: body is 20\d{3} bytes, above the 10000 byte limit \(maxBodyBytes\); nothing was sent$/,
    ],
    [
      'a --max-body-bytes SQS cannot have',
      ['send', '--file', MEDIUM, '--max-body-bytes', '2000000'],
      /^leaseq: option '--max-body-bytes <n>' argument '2000000' is invalid\. expected an integer from 1024 to 1048576$/,
    ],
    [
      'file with --count',
      ['send', '--file', 'x.json', '--count', '3'],
      /^leaseq: --file sends the jobs in the file/,
    ],
  ];
  for (const [name, args, pattern] of cases) {
    it(name, async () => {
      const run = await leaseq([...args, '--prefix', prefix]);
      expect(run.code).not.toBe(0);
      expect(run.stdout).toBe('');
      expect(run.stderr.split('\n')).toHaveLength(2);
      expect(run.stderr.trimEnd()).toMatch(pattern);
    });
  }

  it('missing queue (wrong prefix) names the queue and what to do', async () => {
    const run = await leaseq(['status', '--prefix', 'leaseq-nothing-here', '--json']);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(
      /^leaseq: queue leaseq-nothing-here-jobs does not exist at .*pass --prefix \/ --outputs\n$/,
    );
  });

  it('unreachable endpoint says so in one line', async () => {
    const run = await leaseq([
      'send',
      '--count',
      '1',
      '--endpoint',
      'http://127.0.0.1:9',
      '--prefix',
      prefix,
    ]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      /^leaseq: cannot reach http:\/\/127\.0\.0\.1:9 \(.*\); start what should answer there, or check --endpoint\n$/,
    );
    expect(run.stderr).not.toMatch(/\n\s+at /);
  });

  it('none of the bad commands sent anything', async () => {
    expect(await queueCounts(env)).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
  });
});
