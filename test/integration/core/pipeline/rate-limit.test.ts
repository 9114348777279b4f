import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DynamoDbRateStore } from '../../../../shared/core/adapters/dynamodb-rate-store.ts';
import { readDeadLetterAttributes } from '../../../../shared/core/adapters/sqs-job-queue.ts';
import type { RateStore } from '../../../../shared/core/contract/rate-store.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { MetricName } from '../../../../shared/core/observe/metric-names.ts';
import { defineJob } from '../../../../shared/jobs/define-job.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  makeWorker,
  receiveAll,
  sendJob,
} from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';

// Rate limits against the emulator's real SQS and DynamoDB: several workers (each its own processor and
// rate store) take permits from one item per key; the jobs record when they start.

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('ratelimit');
});
afterAll(() => env?.close());

const LIMIT = 3;
const PER_SECONDS = 2;
const WINDOW_MS = PER_SECONDS * 1000;

/** The most starts in any window [t, t + ms) that begins at a start. */
function busiest(starts: readonly number[], ms: number): number {
  let most = 0;
  for (const t of starts) most = Math.max(most, starts.filter((u) => u >= t && u < t + ms).length);
  return most;
}

describe('Rate limits', () => {
  it('keeps N workers under `limit` starts per window for one key, lets another key flow, uses no attempt', async () => {
    // Prepare
    const starts: { tenant: string; at: number }[] = [];
    const job = defineJob({
      type: 'rate.call',
      payload: z.object({ tenant: z.string(), n: z.number() }),
      rateLimit: { key: (p) => p.tenant, limit: LIMIT, perSeconds: PER_SECONDS },
      run: async (_ctx, p) => {
        starts.push({ tenant: p.tenant, at: Date.now() });
        return {};
      },
    });
    const registry = JobRegistry.of([job]);
    // Each worker's own rate store, noting the time of every permit it was granted.
    const permits: { key: string; at: number }[] = [];
    // Every request the rate stores send (the cost of the limit), and the takes asked of them.
    let rateWrites = 0;
    let rateTakes = 0;
    // The grant times each key's log held, as the store wrote them (its `g`): a grant is stamped at
    // max(the taker's now, its clock less 1 s, the log's newest grant), so a taker whose take was slow
    // (the machine busy) is granted later than the `now` it passed (decisions/rate.ts).
    const stamped = new Map<string, Set<number>>();
    const counted = {
      send: async (command: never) => {
        rateWrites++;
        const out = await env.clients.doc.send(command);
        const input = (
          command as {
            input?: { Key?: { leaseKey?: string }; ExpressionAttributeValues?: Record<string, unknown> };
          }
        ).input;
        const key = input?.Key?.leaseKey;
        const grants = input?.ExpressionAttributeValues?.[':g'];
        if (key !== undefined && Array.isArray(grants)) {
          const set = stamped.get(key) ?? new Set<number>();
          for (const g of grants) set.add(g as number);
          stamped.set(key, set);
        }
        return out;
      },
    } as unknown as typeof env.clients.doc;
    const workers = Array.from({ length: 3 }, () => {
      const store = new DynamoDbRateStore({ client: counted, tableName: env.leasesTable });
      const rates: RateStore = {
        take: async (key, limit, perSeconds, now) => {
          rateTakes++;
          const take = await store.take(key, limit, perSeconds, now);
          if (take.granted) permits.push({ key, at: now });
          return take;
        },
      };
      return makeWorker(env, registry, { rates });
    });
    const [hot, cold] = [uniqueName('hot'), uniqueName('cold')];
    const keys = [
      ...Array.from({ length: 12 }, (_, n) => ({ tenant: hot, n })),
      ...Array.from({ length: 3 }, (_, n) => ({ tenant: cold, n })),
    ].map((payload) => ({ payload, dedupKey: uniqueName(`${payload.tenant}-${payload.n}`) }));

    // Act: the hot burst first, then the cold jobs, all three workers polling together.
    const sentAt = Date.now();
    for (const { payload, dedupKey } of keys) await sendJob(env, { dedupKey, type: 'rate.call', payload });
    let stop = false;
    const polling = Promise.all(
      workers.map(async (w) => {
        while (!stop) await w.poll(1);
      }),
    );
    const allRan = await eventually(async () => starts.length >= keys.length, 60_000, 250);
    stop = true;
    await polling;

    // Assess: every job ran once, on its first attempt, nothing dead-lettered.
    expect(allRan).toBe(true);
    expect(starts).toHaveLength(keys.length);
    for (const { dedupKey } of keys) {
      const item = await workers[0]?.store.get(dedupKey);
      expect(item).toMatchObject({ status: JobStatus.Completed, attempts: 1 });
    }
    expect(await receiveAll(env, env.dlqUrl, 30, 0)).toEqual([]);
    // The hot key's permits, as granted: never more than LIMIT in any window of PER_SECONDS.
    const hotPermits = permits.filter((p) => p.key === `rate:rate.call:k:${hot}`).map((p) => p.at);
    expect(hotPermits).toHaveLength(12);
    const hotStamps = [...(stamped.get(`rate:rate.call:k:${hot}`) ?? [])];
    expect(hotStamps).toHaveLength(12);
    expect(busiest(hotStamps, WINDOW_MS)).toBe(LIMIT);
    // The hot key: never more than LIMIT starts in any window of PER_SECONDS. A start is stamped inside the
    // job, after its permit and its claim, so starts may sit closer together than their permits by that
    // gap; 300 ms of the window is left for it.
    const hotStarts = starts.filter((s) => s.tenant === hot).map((s) => s.at);
    const seen = busiest(hotStarts, WINDOW_MS - 300);
    console.info(
      `rate: hot key busiest window ${busiest(hotStamps, WINDOW_MS)} grants (${busiest(hotPermits, WINDOW_MS)} by the takers' clocks), ${busiest(hotStarts, WINDOW_MS)} starts per ${WINDOW_MS} ms (${seen} per ${WINDOW_MS - 300} ms); ` +
        `12 hot jobs took ${Math.max(...hotStarts) - sentAt} ms; rate store: ${rateWrites} writes for ${rateTakes} takes, ${keys.length} jobs`,
    );
    expect(seen).toBeLessThanOrEqual(LIMIT);
    // 12 starts at 3 per 2 s need at least 3 more windows after the first burst.
    expect(Math.max(...hotStarts) - Math.min(...hotStarts)).toBeGreaterThanOrEqual(3 * WINDOW_MS - 300);
    // The cold key is not held back by the hot one: its 3 jobs start within the first few seconds.
    const coldStarts = starts.filter((s) => s.tenant === cold).map((s) => s.at);
    expect(Math.max(...coldStarts) - sentAt).toBeLessThan(4000);
    // One permit item per key, its log no longer than the limit.
    const items = await env.clients.doc.send(
      new ScanCommand({
        TableName: env.leasesTable,
        FilterExpression: 'begins_with(leaseKey, :p)',
        ExpressionAttributeValues: { ':p': 'rate:rate.call:' },
        ConsistentRead: true,
      }),
    );
    expect((items.Items ?? []).map((i) => i.leaseKey).sort()).toEqual(
      [`rate:rate.call:k:${cold}`, `rate:rate.call:k:${hot}`].sort(),
    );
    for (const item of items.Items ?? []) expect((item.g as number[]).length).toBeLessThanOrEqual(LIMIT);
    // The waits were give-backs and in-process waits, not attempts.
    const waits = workers.reduce((n, w) => n + w.metrics.get(MetricName.LimitWait, { kind: 'rate' }), 0);
    expect(waits).toBeGreaterThan(0);
  }, 90_000);

  it('dead-letters a job whose key function fails as invalid-limit-key, never claimed, payload not in the text', async () => {
    // Prepare
    const job = defineJob({
      type: 'rate.badkey',
      payload: z.object({ secret: z.string(), mode: z.string() }),
      rateLimit: {
        limit: 5,
        perSeconds: 1,
        key: (p) => {
          if (p.mode === 'throw') throw new Error(`boom ${p.secret}`);
          return p.mode === 'long' ? 'x'.repeat(201) : p.mode === 'empty' ? '' : (42 as never);
        },
      },
      run: async () => ({}),
    });
    const worker = makeWorker(env, JobRegistry.of([job]));
    const cases = ['throw', 'long', 'empty', 'number'].map((mode) => ({
      mode,
      dedupKey: uniqueName(`bad-${mode}`),
    }));
    for (const { mode, dedupKey } of cases) {
      await sendJob(env, { dedupKey, type: 'rate.badkey', payload: { secret: 'hunter2', mode } });
    }

    // Act
    await eventually(async () => {
      await worker.poll(1);
      return worker.metrics.get(MetricName.JobDeadLettered, { jobType: 'rate.badkey' }) >= cases.length;
    }, 30_000);

    // Assess
    const letters = await receiveAll(env, env.dlqUrl, 30, 1);
    const texts = letters.map((m) => readDeadLetterAttributes(m.MessageAttributes));
    expect(texts).toHaveLength(cases.length);
    for (const text of texts) {
      expect(text.reason).toBe('invalid-limit-key');
      expect(text.errorMessage).toMatch(
        /^InvalidLimitKeyError: the key of rate limit rate\.badkey (threw|must return) /,
      );
      expect(JSON.stringify(text)).not.toContain('hunter2');
    }
    expect(texts.map((t) => t.errorMessage).sort()).toEqual([
      'InvalidLimitKeyError: the key of rate limit rate.badkey must return a string of 1-200 characters, returned a string of 0 characters',
      'InvalidLimitKeyError: the key of rate limit rate.badkey must return a string of 1-200 characters, returned a string of 201 characters',
      'InvalidLimitKeyError: the key of rate limit rate.badkey must return a string of 1-200 characters, returned number',
      'InvalidLimitKeyError: the key of rate limit rate.badkey threw Error',
    ]);
    for (const { dedupKey } of cases) expect(await worker.store.get(dedupKey)).toBeUndefined();
  }, 60_000);
});
