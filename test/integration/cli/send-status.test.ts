import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseEnvelope } from '../../../shared/core/contract/envelope.ts';
import type { StatusReport } from '../../../shared/ops/status.ts';
import { type CoreEnv, coreEnv, queueCounts, receiveAll } from '../../support/core-fixture.ts';
import { deleteMessages, drainQueue } from '../../support/fresh-queues.ts';
import { leaseq, leaseqJson } from './run-cli.ts';

let env: CoreEnv;
let prefix: string;
const dir = mkdtempSync(join(tmpdir(), 'leaseq-cli-send-'));

beforeAll(async () => {
  env = await coreEnv('clisend');
  // resourceNames(prefix) names the jobs table `<prefix>-jobs`.
  prefix = env.jobsTable.replace(/-jobs$/, '');
});
// The CLI finds the queue by the stack's prefix, so the cases share it: each empties it after itself.
afterEach(async () => {
  await drainQueue(env, env.queueUrl);
});
afterAll(() => env?.close());

interface SendJson {
  runId: string;
  source: string;
  jobs: number;
  planned: number;
  sent: number;
  duplicates: number;
  failed: number;
}

describe('Command: leaseq send', () => {
  it('--count 20 --duplicates 0.25 puts 25 messages in the queue: 20 distinct jobs, 5 sent twice', async () => {
    // Act
    const out = await leaseqJson<SendJson>([
      'send',
      '--prefix',
      prefix,
      '--count',
      '20',
      '--duplicates',
      '0.25',
    ]);
    // Assess: the report
    expect(out).toMatchObject({
      source: 'generated',
      jobs: 20,
      planned: 25,
      sent: 25,
      duplicates: 5,
      failed: 0,
    });
    // Assess: the queue
    expect(await queueCounts(env)).toEqual({ visible: 25, inFlight: 0, delayed: 0 });
    const messages = await receiveAll(env, env.queueUrl);
    await deleteMessages(env, env.queueUrl, messages);
    expect(messages).toHaveLength(25);
    const envelopes = messages.map((m) => parseEnvelope(m.Body ?? ''));
    const perKey = new Map<string, number>();
    for (const e of envelopes) perKey.set(e.dedupKey, (perKey.get(e.dedupKey) ?? 0) + 1);
    expect(perKey.size).toBe(20);
    expect([...perKey.values()].filter((n) => n === 2)).toHaveLength(5);
    for (const key of perKey.keys()) expect(key.startsWith(`${out.runId}-`)).toBe(true);
  });

  it('status --json reports the queue depth, an empty DLQ and no job items before any worker ran', async () => {
    await leaseqJson(['send', '--prefix', prefix, '--count', '7']);
    const status = await leaseqJson<StatusReport>(['status', '--prefix', prefix]);
    expect(status.queue).toMatchObject({ visible: 7, inFlight: 0, delayed: 0 });
    expect(status.dlq).toMatchObject({ depth: 0 });
    expect(status.jobs.total).toBe(0);
    expect(status.jobs.oldestUnfinishedAgeMs).toBeNull();
    // The human view says the same in words.
    const human = await leaseq(['status', '--prefix', prefix]);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/queue:\s+\S+-jobs: 7 visible, 0 in flight, 0 delayed/);
  });

  it('sends the jobs of an NDJSON file, a repeated dedup key counting as a duplicate', async () => {
    // Prepare
    const file = join(dir, 'jobs.ndjson');
    writeFileSync(
      file,
      [
        JSON.stringify({ type: 'ledger.credit', payload: { account: 'a', amount: 2 }, dedupKey: 'order-1' }),
        '',
        JSON.stringify({ type: 'ledger.transfer', payload: { from: 'a', to: 'b', amount: 1 } }),
        JSON.stringify({ type: 'ledger.credit', payload: { account: 'a', amount: 2 }, dedupKey: 'order-1' }),
      ].join('\n'),
    );
    // Act
    const out = await leaseqJson<SendJson>(['send', '--prefix', prefix, '--file', file, '--rate', '100/s']);
    // Assess
    expect(out).toMatchObject({ source: 'file', jobs: 2, sent: 3, duplicates: 1, failed: 0 });
    const received = await receiveAll(env, env.queueUrl);
    await deleteMessages(env, env.queueUrl, received);
    const keys = received.map((m) => parseEnvelope(m.Body ?? '').dedupKey).sort();
    expect(keys).toEqual(['order-1', 'order-1', `${out.runId}-000003`]);
  });

  it('sends nothing from a file with a bad line, and names the line', async () => {
    const file = join(dir, 'bad.ndjson');
    writeFileSync(
      file,
      [
        JSON.stringify({ type: 'ledger.credit', payload: { account: 'a', amount: 2 } }),
        JSON.stringify({ type: 'ledger.credit', payload: { account: 'a', amount: 2 } }),
        JSON.stringify({ type: 'ledger.credit', payload: { account: 'a', amount: -2 } }),
      ].join('\n'),
    );
    const run = await leaseq(['send', '--prefix', prefix, '--file', file, '--json']);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(
      /^leaseq: .*bad\.ndjson: line 3: payload of ledger\.credit: amount: .*nothing was sent\n$/,
    );
    expect(await queueCounts(env)).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
  });
});
