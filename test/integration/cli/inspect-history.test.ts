// `leaseq inspect` (the CLI, a real subprocess) of one job that lived through every history event: real
// workers against the emulator fail it once, a worker dies holding its lease and another takes it over,
// dead-letters it, `leaseq dlq redrive` sends it back, and it completes. The timeline tells it in order.
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../shared/core/model/registry.ts';
import { PermanentJobError, TransientJobError } from '../../../shared/errors.ts';
import type { InspectReport } from '../../../shared/ops/inspect.ts';
import { type CoreEnv, coreEnv, eventually, makeWorker, sendJob } from '../../support/core-fixture.ts';
import { uniqueName } from '../../support/env.ts';
import { leaseq, leaseqJson } from './run-cli.ts';

let env: CoreEnv;
let prefix: string;

beforeAll(async () => {
  env = await coreEnv('cliinsh');
  prefix = env.jobsTable.replace(/-jobs$/, '');
});
afterAll(() => env?.close());

describe('Command: leaseq inspect, the timeline of a job retried, taken over, dead-lettered and redriven', () => {
  it('shows failed, takeover, dead, redrive and completed in that order, as text and as JSON', async () => {
    const started = Date.now();
    // Prepare: a job whose first run fails transiently, whose second run (after a takeover) fails
    // permanently, and whose third (after the redrive) succeeds.
    let runs = 0;
    const registry = new JobRegistry().register({
      type: 'test.lifecycle',
      payload: z.object({}),
      run: async () => {
        runs += 1;
        if (runs === 1) throw new TransientJobError('first run fails');
        if (runs === 2) throw new PermanentJobError('second run is broken');
        return { result: { ok: true } };
      },
    });
    const key = uniqueName('life');
    const store = makeWorker(env, registry).store;
    const statusIs = async (status: JobStatus) => (await store.get(key))?.status === status;
    await sendJob(env, { dedupKey: key, type: 'test.lifecycle', payload: {} });

    // Act 1: w-a fails attempt 1 (released with a 1 s backoff).
    const a = makeWorker(env, registry, { worker: 'w-a' });
    expect(await eventually(async () => (await a.poll(1)) > 0 && statusIs(JobStatus.RetryWait))).toBe(true);

    // Act 2: w-died receives the message again, claims attempt 2 with a 1 s lease, and dies: it never
    // renews, releases or deletes. The message comes back after its 2 s visibility.
    let died: { lease: { token: number } } | undefined;
    expect(
      await eventually(async () => {
        const out = await env.clients.sqs.send(
          new ReceiveMessageCommand({ QueueUrl: env.queueUrl, WaitTimeSeconds: 1, VisibilityTimeout: 2 }),
        );
        const message = out.Messages?.[0];
        if (!message) return false;
        const claim = await store.claim({
          dedupKey: key,
          owner: 'w-died',
          messageId: message.MessageId ?? '',
          type: 'test.lifecycle',
          createdAt: new Date().toISOString(),
          leaseMs: 1000,
          now: Date.now(),
        });
        if (claim.claimed) died = claim;
        return claim.claimed;
      }, 10_000),
    ).toBe(true);

    // Act 3: w-c takes the ended lease over (attempt 3), the run fails permanently: dead-lettered.
    const c = makeWorker(env, registry, { worker: 'w-c' });
    expect(await eventually(async () => (await c.poll(1)) > 0 && statusIs(JobStatus.Dead), 20_000)).toBe(
      true,
    );

    // Act 4: the operator redrives it; w-d runs it to completion.
    const redrive = await leaseq(['dlq', 'redrive', '--prefix', prefix, '--dedup-key', key, '--yes']);
    expect(redrive.code, redrive.stderr).toBe(0);
    expect(redrive.stdout).toMatch(/redrove 1, skipped 0, failed 0/);
    const d = makeWorker(env, registry, { worker: 'w-d' });
    expect(await eventually(async () => (await d.poll(1)) > 0 && statusIs(JobStatus.Completed), 20_000)).toBe(
      true,
    );
    expect(runs).toBe(3);

    // Assess: the text timeline ...
    const shown = await leaseq(['inspect', key, '--prefix', prefix]);
    expect(shown.code).toBe(0);
    const timeline = shown.stdout.slice(shown.stdout.indexOf('TIMELINE'));
    const kinds = timeline
      .split('\n')
      .slice(1)
      .filter((line) => line !== '')
      .map((line) => line.split(/\s{2,}/)[1]);
    expect(kinds).toEqual(['created', 'failed', 'takeover', 'dead', 'redrive', 'claimed', 'completed']);
    expect(timeline).toMatch(
      /failed +attempt 1, owner w-a, .*attempt 1 failed +TransientJobError: first run fails/,
    );
    expect(timeline).toMatch(
      new RegExp(
        `takeover +attempt 3, owner w-c, .*took over the lease of w-died +its lease \\(token ${died?.lease.token}, attempt 2`,
      ),
    );
    expect(timeline).toMatch(
      /dead +attempt 3, owner w-c, .*dead-lettered: permanent-error +PermanentJobError: second run is broken/,
    );
    expect(timeline).toMatch(/redrive +- +redriven by /);
    expect(timeline).toMatch(/completed +attempt 1, owner w-d, .*completed on attempt 1/);

    // ... and the JSON one, the same events in the same order.
    const report = await leaseqJson<InspectReport>(['inspect', key, '--prefix', prefix]);
    expect(report.job.status).toBe(JobStatus.Completed);
    expect(report.timeline.map((e) => e.kind)).toEqual(kinds);
    expect(report.timeline.find((e) => e.kind === 'takeover')).toMatchObject({ owner: 'w-c', attempt: 3 });
    process.stderr.write(`inspect history test: ${Date.now() - started} ms\n`);
  });
});
