// `leaseq cancel` as a script runs it (stdin not a terminal): it refuses without --yes in one line,
// refuses a key no job can have before touching anything, and answers each state with its exit code;
// `leaseq jobs --status CANCELLED` lists the job and `leaseq inspect` shows who cancelled it and why.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { toSqsRecord } from '../../../shared/runner/sqs-records.ts';
import { type CoreEnv, coreEnv, makeWorker, receiveAll, sendJob } from '../../support/core-fixture.ts';
import { uniqueName } from '../../support/env.ts';
import { untilIndexed } from '../../support/problems-index.ts';
import { testRegistry } from '../../support/test-jobs.ts';
import { leaseq } from './run-cli.ts';

let env: CoreEnv;
let prefix: string;

beforeAll(async () => {
  env = await coreEnv('clicancel');
  prefix = env.jobsTable.replace(/-jobs$/, '');
});
afterAll(() => env?.close());

/** Runs `key`'s job through a worker once (`failTimes` 1: it waits for a retry; else it completes). */
async function runOnce(key: string, failTimes?: number): Promise<void> {
  const worker = makeWorker(env, testRegistry(env).registry);
  await sendJob(env, {
    dedupKey: key,
    type: 'test.credit',
    payload: { account: uniqueName('a'), amount: 1, ...(failTimes ? { failTimes } : {}) },
  });
  for (let i = 0; i < 8; i++) {
    const mine = (await receiveAll(env, env.queueUrl, 30, 2)).find((m) => m.Body?.includes(key));
    if (mine) {
      await worker.processor.process(toSqsRecord(mine, env.queueArn, env.region));
      return;
    }
  }
  throw new Error(`no message for ${key}`);
}

describe('leaseq cancel (against the emulator)', () => {
  it('refuses without --yes when nobody can be asked: one line, exit 1, nothing written', async () => {
    // Prepare
    const key = uniqueName('noyes');

    // Act
    const run = await leaseq(['cancel', key, '--prefix', prefix]);

    // Assess
    expect(run.code).toBe(1);
    expect(run.stderr.trim().split('\n').at(-1)).toBe(
      `leaseq: refusing to cancel ${key} without confirmation: not a terminal, pass --yes`,
    );
    expect(await makeWorker(env, testRegistry(env).registry).store.get(key)).toBeUndefined();
  });

  it('refuses a key no job can have in one line, exit 1, before asking or touching anything', async () => {
    for (const bad of ['', 'x'.repeat(257), 'bad\u0007key']) {
      // Act
      const run = await leaseq(['cancel', bad, '--yes', '--prefix', prefix]);

      // Assess: the key's length, never the key itself (it may hold what a terminal must not print).
      expect(run.code).toBe(1);
      expect(run.stderr).toBe(
        `leaseq: not a dedupKey (${bad.length} characters): a job's dedupKey is 1-256 printable characters\n`,
      );
    }
  });

  it('cancels a waiting job (exit 0), says so again after (exit 0), answers finished for a completed one (exit 3)', async () => {
    // Prepare
    const waiting = uniqueName('waiting');
    await runOnce(waiting, 1);
    const done = uniqueName('done');
    await runOnce(done);
    const fresh = uniqueName('fresh');

    // Act
    const cancelled = await leaseq([
      'cancel',
      waiting,
      '--reason',
      'sent twice',
      '--yes',
      '--prefix',
      prefix,
    ]);
    const again = await leaseq(['cancel', waiting, '--yes', '--prefix', prefix]);
    const finished = await leaseq(['cancel', done, '--yes', '--prefix', prefix]);
    const tomb = await leaseq(['cancel', fresh, '--yes', '--json', '--prefix', prefix]);

    // Assess
    expect(cancelled).toMatchObject({
      code: 0,
      stdout: `cancelled ${waiting}: it was waiting for a retry; the retry will not run\n`,
    });
    expect(again).toMatchObject({ code: 0, stdout: `${waiting} was already cancelled\n` });
    expect(finished).toMatchObject({
      code: 3,
      stdout: `not cancelled: ${done} is already finished (COMPLETED)\n`,
    });
    expect(tomb.code).toBe(0);
    expect(JSON.parse(tomb.stdout)).toEqual({ dedupKey: fresh, outcome: 'tombstone' });

    // The listing and the inspector show it, with who and why.
    await untilIndexed(env.clients.doc, env.jobsTable, [waiting, fresh], { status: JobStatus.Cancelled });
    const listed = await leaseq(['jobs', '--status', 'CANCELLED', '--json', '--prefix', prefix]);
    expect(listed.code).toBe(0);
    const keys = (JSON.parse(listed.stdout) as { jobs: { dedupKey: string; status: string }[] }).jobs;
    expect(keys.filter((j) => j.dedupKey === waiting || j.dedupKey === fresh).map((j) => j.status)).toEqual([
      JobStatus.Cancelled,
      JobStatus.Cancelled,
    ]);
    const inspected = await leaseq(['inspect', waiting, '--prefix', prefix]);
    expect(inspected.code).toBe(0);
    expect(inspected.stdout).toMatch(/status:\s+CANCELLED/);
    expect(inspected.stdout).toMatch(/cancelled\s+-\s+cancelled by \S+@\S+\s+sent twice/);
    expect(inspected.stdout).toContain('the job is cancelled: it never runs again');
  });
});
