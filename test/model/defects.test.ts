import type { Logger } from '@aws-lambda-powertools/logger';
import type { SQSRecord } from 'aws-lambda';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { makeEnvelope } from '../../shared/core/contract/envelope.ts';
import type { JobStore } from '../../shared/core/contract/job-store.ts';
import type { LeaseStore } from '../../shared/core/contract/lease-store.ts';
import type { RateStore } from '../../shared/core/contract/rate-store.ts';
import { JobStatus } from '../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../shared/core/model/registry.ts';
import type { PayloadSchema } from '../../shared/core/model/standard-schema.ts';
import { processBatch } from '../../shared/core/pipeline/batch.ts';
import { JobProcessor } from '../../shared/core/pipeline/processor.ts';
import { TransientJobError } from '../../shared/errors.ts';
import { defineJob } from '../../shared/jobs/define-job.ts';
import { InMemoryQueue } from '../../shared/testing/in-memory-queue.ts';
import { type RunOptions, runScenario } from './harness.ts';
import { ModelDb } from './model-db.ts';
import { type Scenario, type SteerKind, scenarioArb } from './scenario.ts';

/*
 * A controlled break of the pipeline for one check of issue 21 (below): a job that finds its limit full
 * is claimed before it is bounced, so the bounce uses an attempt. Off everywhere else in this file.
 */
const broken = vi.hoisted(() => ({ claimBeforeBounce: false }));
vi.mock('../../shared/core/pipeline/limits.ts', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../shared/core/pipeline/limits.ts')>();
  return {
    ...real,
    takeSlots: async (...args: Parameters<typeof real.takeSlots>) => {
      const out = await real.takeSlots(...args);
      if (broken.claimBeforeBounce && 'busy' in out) {
        const [s, job] = args;
        await s.store
          .claim({
            dedupKey: job.envelope.dedupKey,
            owner: s.worker,
            messageId: job.message.record.messageId,
            type: job.envelope.type,
            createdAt: job.envelope.createdAt,
            leaseMs: s.leaseMs,
            now: s.now(),
          })
          .catch(() => undefined);
      }
      return out;
    },
  };
});

/*
 * Defects the interleaving model found, each as a focused reproduction that failed before its fix.
 *
 * D1: a racing duplicate is deleted late, after it became the job's own message. Fixed: a copy judged a
 * racing duplicate is first hidden past the end of its batch (`actOnRefusal` in shared/core/pipeline/refusal.ts).
 *
 * A copy M1 whose claim is refused because another message (M2) holds the job (`duplicate-racing`,
 * "another message holds this job: deleting this copy") gets disposition `delete`, but its visibility is
 * left as the receive set it, and the delete is done by the caller at the end of the batch (the event
 * source, or pollOnce's DeleteMessageBatch) with M1's receipt handle of that receive. If the batch (or
 * the delete call) outlasts M1's visibility, M1 is received again meanwhile; when the job is claimable
 * (released for a retry, or its lease expired) that receive claims it, so the item's messageId is now
 * M1, and M2, back later, is itself dropped as a racing copy. Then the late delete lands, and SQS honours
 * a delete with an older receipt (AWS: "succeeds, but the message might not be deleted"; in practice it
 * usually deletes, docs/emulators.md; InMemoryQueue deletes). The job is left RETRY_WAIT (or IN_PROGRESS)
 * with no message to bring it back: stuck until an operator redrive, against "every unfinished job has a
 * way back" (docs/protocol.md). Lambda is safe in practice (its receive visibility is 6 x the timeout
 * and the invocation is killed at the timeout); the local runner is not: it receives with a visibility
 * near the lease (`visibilityForLease`, shared/runner/worker-process.ts) and deletes after the whole
 * batch, which may run for the worker timeout (60 s) while a sibling job holds its lease by heartbeats.
 * Found by the model several times: in its first version (every worker then polled like the local
 * runner) at run 1138 of 2000 with no store fault at all, just a batch outlasting a 1 s visibility (the
 * first test below is that schedule, written out by hand); with LEASEQ_MODEL_POLLER=1 shrunk to the
 * scenario of the second test (a release outage, then one delete arriving 3.4 s late); and on this
 * harness with `LEASEQ_MODEL_POLLER=1 LEASEQ_MODEL_SEED=1 LEASEQ_MODEL_RUNS=3000 npm run test:model`
 * (run 1103, shrunk: the item is left IN_PROGRESS after a DLQ send failed, its holder m-9 deleted by a
 * batch that had judged m-9 a racing copy 5 s earlier). A seed replays only on the harness that found
 * it; a written-out scenario replays as long as the harness draws its random choices the same way.
 *
 * D2 (fixed): a fast commit ran a job past its attempt budget. The fast path's one write
 * (`claimAndComplete`) takes a job under the claim's condition alone: no item, or not COMPLETED/DEAD and
 * its lease over. A leased claim under the same condition then checks the attempts: past maxAttempts it
 * does not run the job but finishes its dead-lettering (processor.ts, "no run is left"). The fast path
 * has no such check, since it ran the job before the write. So when the last attempt of a job was
 * dead-lettered (the letter sent) but marking it DEAD failed (an outage, or the worker died between the
 * two), the item stays IN_PROGRESS; its message is kept, and "its next delivery finishes the
 * dead-lettering" (dead-letterer.ts). If that next delivery is a duplicate send on its first receive, it
 * runs fast once the lease has ended, and its commit completes the job at attempt maxAttempts + 1, with
 * its effect, while the DLQ holds a letter for it: COMPLETED with a dead letter, against "DEAD iff
 * dead-lettered". (Without a letter, e.g. a last attempt whose worker died, the fast commit still runs
 * the job once more than maxAttempts allows.) Found by the model at run 1587 of its first 5,000 schedules
 * with fast jobs (shrunk to the first scenario below: one mark-dead outage, one duplicate), then by
 * LEASEQ_MODEL_SEED=1002 at run 2469 (the second: the letters' and the fast commit's answers lost).
 * test/unit/core/pipeline/fast-path.test.ts has the focused reproduction. Fixed: the fast commit's condition
 * carries the budget (`attempts < maxAttempts`, from the processor), so such a job is refused, and the
 * worker claims it at once and finishes its dead-lettering.
 */

const silent = { debug() {}, info() {}, warn() {}, error() {} } as unknown as Logger;
const anything: PayloadSchema<unknown> = {
  '~standard': { version: 1, vendor: 'repro', validate: (value) => ({ value }) },
};

describe('Defect D1: a racing duplicate deleted late strands its job', () => {
  beforeEach(() => {
    vi.useFakeTimers({
      now: Date.parse('2030-01-01T00:00:00Z'),
      toFake: ['setTimeout', 'clearTimeout', 'Date'],
    });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('local runner timing, no fault: the job still ends COMPLETED (before the fix: RETRY_WAIT, no message)', async () => {
    // Prepare: job J fails its first two runs (the first after 2 s of work), then succeeds; job X works
    // 5 s under heartbeats. Backoff: 1 s after attempt 1, 2 s after attempt 2 (random 0.99).
    let runsOfJ = 0;
    const registry = JobRegistry.of([
      defineJob({
        type: 'repro.flaky',
        payload: anything,
        async run() {
          runsOfJ += 1;
          if (runsOfJ === 1) await new Promise((resolve) => setTimeout(resolve, 2000));
          if (runsOfJ <= 2) throw new TransientJobError(`run ${runsOfJ} fails`);
          return { result: 'done' };
        },
      }),
      defineJob({
        type: 'repro.slow',
        payload: anything,
        async run() {
          await new Promise((resolve) => setTimeout(resolve, 5000));
          return { result: 'slow done' };
        },
      }),
    ]);
    // The job store that ships, on the in-memory DynamoDB.
    const store = new ModelDb({ committed: () => undefined, granted: () => undefined }).store;
    const queue = new InMemoryQueue();
    const worker = (id: string) =>
      new JobProcessor({
        store,
        queue,
        registry,
        worker: id,
        logger: silent,
        leaseMs: 1500,
        maxAttempts: 5,
        backoff: { baseSeconds: 1, capSeconds: 8 },
        random: () => 0.99,
      });
    const a = worker('a');
    const b = worker('b');
    const body = (id: string, dedupKey: string, type: string) =>
      JSON.stringify(makeEnvelope({ id, dedupKey, type, payload: {} }));
    const m1 = queue.send(body('j-1', 'J', 'repro.flaky'));
    const m2 = queue.send(body('j-2', 'J', 'repro.flaky')); // a duplicate send of J
    const mx = queue.send(body('x-1', 'X', 'repro.slow'));
    // The local runner's receive visibility: visibilityForLease(1500) = 3 s.
    const receive = (...ids: string[]): SQSRecord[] =>
      queue.receive(10, { visibilitySeconds: 3, pick: (v) => v.filter((m) => ids.includes(m.messageId)) });
    /** What pollOnce does with a batch: run it, then delete every record not reported failed. */
    const poll = async (processor: JobProcessor, records: SQSRecord[]) => {
      const { outcomes } = await processBatch(records, processor);
      for (const [i, outcome] of outcomes.entries()) {
        if (outcome.disposition === 'delete') await queue.delete((records[i] as SQSRecord).receiptHandle);
      }
      return outcomes.map((o) => `${o.messageId}:${o.action}`);
    };

    // Act
    // t=0: worker a takes J through M2 (its run takes 2 s); worker b's batch is [M1, X]: M1 is a racing
    // copy (J is held by M2), X runs 5 s, so M1 is deleted at t=5 s, its visibility having ended at t=3 s.
    const batchA1 = poll(a, receive(m2));
    await vi.advanceTimersByTimeAsync(0);
    const batchB = poll(b, receive(m1, mx));
    await vi.advanceTimersByTimeAsync(0);
    expect((await store.get('J'))?.messageId).toBe(m2);
    // t=2 s: J's first run fails: RETRY_WAIT until t=3 s, M2 hidden for 1 s.
    await vi.advanceTimersByTimeAsync(2000);
    expect(await batchA1).toEqual([`${m2}:retry`]);
    // t=3.1 s: before the fix, M1 was visible again here (3 s visibility), claimed J and became its
    // guard, and b's late delete at t=5 s then stranded J. Now M1 was hidden past b's batch when it was
    // judged a racing copy: only M2 shows, and it takes J again.
    await vi.advanceTimersByTimeAsync(1100);
    expect(await poll(a, receive(m1, m2))).toEqual([`${m2}:retry`]);
    expect((await store.get('J'))?.messageId).toBe(m2);
    // t=5 s: b's batch ends and deletes M1, which nothing depends on.
    await vi.advanceTimersByTimeAsync(2000);
    expect(await batchB).toEqual([`${m1}:duplicate`, `${mx}:completed`]);
    // Ten minutes of polling by both workers.
    for (let i = 0; i < 600; i++) {
      await vi.advanceTimersByTimeAsync(1000);
      const records = receive(m1, m2);
      if (records.length > 0) await poll(i % 2 ? a : b, records);
    }

    // Assess: the promise is COMPLETED with no message left (before the fix: RETRY_WAIT, an empty queue).
    const item = await store.get('J');
    expect({ status: item?.status, messages: queue.size }).toEqual({
      status: JobStatus.Completed,
      messages: 0,
    });
  });

  it('the schedule the model shrank it to (poller, one slow delete) keeps every invariant', async () => {
    // LEASEQ_MODEL_POLLER=1 LEASEQ_MODEL_SEED=-154642889 LEASEQ_MODEL_PATH=<path in the report> replays it.
    const scenario: Scenario = {
      seed: -107671498,
      workers: 2,
      leaseMs: 1500,
      source: { kind: 'poller', timeoutMs: 15000, visibilitySeconds: 0 },
      batchSize: 1,
      maxAttempts: 3,
      cache: false,
      duplicates: [{ job: 0, atMs: 0, sameBody: false }],
      faults: [
        { atMs: 0, target: 'store', op: 4, mode: 'fail-before', delayMs: 50, times: 1 },
        { atMs: 9, target: 'queue', op: 1, mode: 'delay-before', delayMs: 3447, times: 1 },
      ],
      crashes: [],
      pauses: [],
      jobs: [
        { steps: [], final: { account: 'acct-a', delta: 1 }, sleepMs: 0, failRuns: 2, poison: false },
        { steps: [], final: { account: 'acct-a', delta: 1 }, sleepMs: 0, failRuns: 0, poison: false },
        { steps: [], final: { account: 'acct-a', delta: 1 }, sleepMs: 0, failRuns: 0, poison: false },
        { steps: [], sleepMs: 0, failRuns: 0, poison: true },
      ],
    };
    const report = await runScenario(scenario);
    expect(report.violations).toEqual([]);
  });

  it('a racing copy is hidden longer than its batch can last (Lambda, slow deletes): no job stranded', async () => {
    // Found by the model right after the first fix, which hid a racing copy only until the invocation's
    // deadline: that was shorter than the 6 x timeout visibility the receive had given it, and a batch
    // whose queue calls were slow deleted the copy after it had become the job's guard.
    const scenario: Scenario = {
      seed: 765780568,
      workers: 2,
      leaseMs: 3000,
      source: { kind: 'lambda', timeoutMs: 15000 },
      batchSize: 3,
      maxAttempts: 3,
      cache: false,
      duplicates: [
        { job: 0, atMs: 17733, sameBody: false },
        { job: 0, atMs: 11703, sameBody: false },
        { job: 0, atMs: 0, sameBody: false },
      ],
      faults: [
        { atMs: 0, target: 'store', op: 5, mode: 'fail-before', delayMs: 50, times: 2 },
        { atMs: 0, target: 'queue', op: 4, mode: 'delay-after', delayMs: 4626, times: 2 },
      ],
      crashes: [
        { slot: 1, atCall: 39, when: 'before', restartAfterMs: 3000 },
        { slot: 0, atCall: 4, when: 'before', restartAfterMs: 6420 },
      ],
      pauses: [{ slot: 0, atMs: 6420, durationMs: 11283 }],
      jobs: [
        { steps: [], final: { account: 'acct-a', delta: 1 }, sleepMs: 11700, failRuns: 1, poison: false },
        { steps: [], final: { account: 'acct-a', delta: 1 }, sleepMs: 0, failRuns: 0, poison: false },
        { steps: [], final: { account: 'acct-a', delta: 1 }, sleepMs: 0, failRuns: 0, poison: false },
        { steps: [], sleepMs: 0, failRuns: 0, poison: true },
      ],
    };
    const report = await runScenario(scenario);
    expect(report.violations).toEqual([]);
  });
});

describe('Defect D2 (fixed): a fast commit ran a job past its attempt budget', () => {
  it('the schedule the model shrank it to: no job COMPLETED with a dead letter', async () => {
    // Job 0 (fast, fails its first 4 runs, maxAttempts 4): attempts 1-4 fail, the 4th is dead-lettered
    // but its mark-dead hits the outage; the duplicate m-5 (first receive, after the lease) commits fast.
    const scenario: Scenario = {
      seed: 0,
      workers: 2,
      leaseMs: 1500,
      source: { kind: 'lambda', timeoutMs: 15000 },
      batchSize: 1,
      maxAttempts: 4,
      cache: false,
      duplicates: [{ job: 0, atMs: 2665, sameBody: false }],
      faults: [{ atMs: 0, target: 'store', op: 5, mode: 'fail-before', delayMs: 50, times: 1 }],
      crashes: [],
      pauses: [],
      jobs: [
        {
          steps: [],
          final: { account: 'acct-a', delta: 1 },
          sleepMs: 0,
          failRuns: 4,
          poison: false,
          fast: true,
        },
        { steps: [], final: { account: 'acct-a', delta: 1 }, sleepMs: 1, failRuns: 0, poison: false },
        { steps: [], final: { account: 'acct-a', delta: 1 }, sleepMs: 0, failRuns: 0, poison: false },
        { steps: [], sleepMs: 0, failRuns: 0, poison: true },
      ],
    };
    const report = await runScenario(scenario);
    expect(report.violations).toEqual([]);
  });

  it('a second shrunk schedule: letters sent with lost answers, the fast commit answer lost', async () => {
    // Found by LEASEQ_MODEL_SEED=1002 (run 2469) after the first: job 1 (fast, fails 3 runs, maxAttempts 3)
    // fails attempts 1-3; attempt 3's letter is sent but its answer lost (so the message is kept, not
    // marked DEAD), attempt 4 (a takeover past the budget) sends another the same way. The duplicate m-4's
    // fast commit completes the job at attempt 5; its answer is lost too, and the read finds it COMPLETED.
    const scenario: Scenario = {
      seed: 13298409,
      workers: 2,
      leaseMs: 1500,
      source: { kind: 'lambda', timeoutMs: 15000 },
      batchSize: 1,
      maxAttempts: 3,
      cache: false,
      duplicates: [{ job: 4, atMs: 2525, sameBody: false }],
      faults: [
        { atMs: 0, target: 'store', op: 6, mode: 'fail-after', delayMs: 50, times: 1 },
        { atMs: 0, target: 'queue', op: 5, mode: 'fail-after', delayMs: 50, times: 2 },
      ],
      crashes: [],
      pauses: [],
      jobs: [
        {
          steps: [{ account: 'acct-a', delta: 1 }],
          final: { account: 'acct-a', delta: 1 },
          sleepMs: 0,
          failRuns: 0,
          poison: false,
        },
        {
          steps: [],
          final: { account: 'acct-a', delta: 1 },
          sleepMs: 0,
          failRuns: 3,
          poison: false,
          fast: true,
        },
        { steps: [], sleepMs: 0, failRuns: 0, poison: true, fast: true },
      ],
    };
    const report = await runScenario(scenario);
    expect(report.violations).toEqual([]);
  });
});

/**
 * Issue 21's checks (harness.ts, steer kinds `concurrency`, `cancel`, `rate`) each shown able to fail: the
 * code under test broken in a controlled way, on schedules that carry the kind, until the check fires.
 */
describe('Issue 21 checks catch what they are for', () => {
  /** The `[kind/check]` tags found over up to `n` schedules of `kind` broken by `options`, stopping once `want` are all found. */
  const found = async (kind: SteerKind, n: number, seed: number, options: RunOptions, want: string[]) => {
    const tags = new Set<string>();
    for (const scenario of fc.sample(scenarioArb({ steer: kind }), { numRuns: n, seed })) {
      const report = await runScenario(scenario, options);
      for (const v of report.violations) {
        const tag = /^\[([a-z-]+\/[a-z-]+)\]/.exec(v)?.[1];
        if (tag) tags.add(tag);
      }
      if (want.every((w) => tags.has(w))) break;
    }
    return [...tags].filter((t) => want.includes(t)).sort();
  };
  const leaseStore = (leases: LeaseStore, overrides: Partial<LeaseStore>): LeaseStore => ({
    tryAcquire: (key, owner, leaseMs, now) => leases.tryAcquire(key, owner, leaseMs, now),
    renew: (lease, leaseMs, now) => leases.renew(lease, leaseMs, now),
    release: (lease) => leases.release(lease),
    get: (key) => leases.get(key),
    getMany: (keys) => (leases.getMany as NonNullable<LeaseStore['getMany']>).call(leases, keys),
    fence: (lease) => leases.fence(lease),
    ...overrides,
  });

  it('concurrency/over-limit: slots that never refuse (each job its own slot item) let more runs of a tenant commit at once', async () => {
    // The slot's condition ignored: every owner gets an item of its own, so no acquire is refused, and
    // each run's fence checks its own item and passes.
    const own = (leases: LeaseStore) =>
      leaseStore(leases, {
        tryAcquire: (key, owner, ms, now) => leases.tryAcquire(`${key}/${owner}`, owner, ms, now),
      });
    expect(await found('concurrency', 100, 21, { wrapLeases: own }, ['concurrency/over-limit'])).toEqual([
      'concurrency/over-limit',
    ]);
  });

  it("concurrency/slot-outlives-crash: a slot renewal that extends past one lease keeps a dead worker's slot", async () => {
    const greedy = (leases: LeaseStore) =>
      leaseStore(leases, {
        tryAcquire: (key, owner, ms, now) =>
          leases.tryAcquire(key, owner, key.startsWith('slot:') ? 4 * ms : ms, now),
      });
    expect(
      await found('concurrency', 200, 22, { wrapLeases: greedy }, ['concurrency/slot-outlives-crash']),
    ).toEqual(['concurrency/slot-outlives-crash']);
  });

  it('concurrency/held-after-settle: a slot release that writes nothing leaves slots held', async () => {
    const keeping = (leases: LeaseStore) =>
      leaseStore(leases, {
        release: (lease) => (lease.key.startsWith('slot:') ? Promise.resolve() : leases.release(lease)),
      });
    expect(
      await found('concurrency', 100, 23, { wrapLeases: keeping }, ['concurrency/held-after-settle']),
    ).toEqual(['concurrency/held-after-settle']);
  });

  it('concurrency/held-after-settle asks who holds that slot, not who holds its token (a token is per key)', async () => {
    // LEASEQ_MODEL_SEED=1430218002, shrunk. Tokens increase per lease key, so two slots often carry one
    // token: w1 takes slot:model.cap:*#0 as token ...003 at t=22833 for job-0's third attempt, whose
    // delete is slowed 3600 ms by the fault and which the invocation's timeout kills at t=37833, leaving
    // the slot to run out one slot lease later (t=42833). Meanwhile (t=36582) w0 takes
    // slot:model.tenant:k:t0#1, also token ...003, dead-letters job-0 and releases it. The check must
    // excuse cap#0 as a killed worker's slot, not blame it on w0.
    const scenario: Scenario = {
      seed: 0,
      workers: 2,
      leaseMs: 6000,
      source: { kind: 'lambda', timeoutMs: 15000 },
      batchSize: 1,
      maxAttempts: 3,
      cache: false,
      readFirst: false,
      duplicates: [],
      faults: [{ atMs: 2, target: 'queue', op: 11, mode: 'delay-before', delayMs: 3600, times: 1 }],
      crashes: [],
      pauses: [],
      jobs: [
        {
          steps: [],
          final: { account: 'acct-a', delta: 1 },
          sleepMs: 11400,
          failRuns: 0,
          poison: false,
          fast: false,
          tenant: 0,
        },
        {
          steps: [],
          final: { account: 'acct-a', delta: 1 },
          sleepMs: 0,
          failRuns: 0,
          poison: false,
          fast: true,
          tenant: 0,
        },
        {
          steps: [],
          final: { account: 'acct-a', delta: 1 },
          sleepMs: 0,
          failRuns: 0,
          poison: false,
          fast: false,
          tenant: 0,
        },
        {
          steps: [],
          final: { account: 'acct-a', delta: 1 },
          sleepMs: 260,
          failRuns: 1,
          poison: false,
          fast: false,
          tenant: 1,
        },
        { steps: [], sleepMs: 1, failRuns: 0, poison: true, fast: true },
      ],
      concurrency: { perTenant: 2, cap: 2 },
    };
    expect((await runScenario(scenario)).violations).toEqual([]);
    // The check still sees a real leak on this very schedule: with slot releases that write nothing,
    // live workers' slots stay held after every job settled.
    const keeping = (leases: LeaseStore) =>
      leaseStore(leases, {
        release: (lease) => (lease.key.startsWith('slot:') ? Promise.resolve() : leases.release(lease)),
      });
    const leaks = (await runScenario(scenario, { wrapLeases: keeping })).violations;
    expect(leaks.filter((v) => v.startsWith('[concurrency/held-after-settle]'))).not.toEqual([]);
  });

  it('concurrency/bounce-used-attempt: a job claimed before its limit is checked', async () => {
    broken.claimBeforeBounce = true;
    try {
      expect(await found('concurrency', 100, 24, {}, ['concurrency/bounce-used-attempt'])).toEqual([
        'concurrency/bounce-used-attempt',
      ]);
    } finally {
      broken.claimBeforeBounce = false;
    }
  });

  it('cancel/*: claims and fast commits that ignore CANCELLED run and commit a cancelled job', async () => {
    const ignoring = (store: JobStore, db: ModelDb): JobStore => {
      const bound = {
        claim: store.claim.bind(store),
        claimAndComplete: store.claimAndComplete.bind(store),
        renew: store.renew.bind(store),
        checkpoint: store.checkpoint.bind(store),
        complete: store.complete.bind(store),
        release: store.release.bind(store),
        markDead: store.markDead.bind(store),
        get: store.get.bind(store),
        resetForRedrive: store.resetForRedrive.bind(store),
        cancel: (store.cancel as NonNullable<JobStore['cancel']>).bind(store),
      };
      // A CANCELLED item is taken like a missing one.
      const forget = (key: string) => {
        if (db.peek(key)?.status === JobStatus.Cancelled) db.deleteJob(key);
      };
      return {
        ...bound,
        claim: (request, options) => {
          forget(request.dedupKey);
          return store.claim(request, options);
        },
        claimAndComplete: (request, result, effects, options) => {
          forget(request.dedupKey);
          return store.claimAndComplete(request, result, effects, options);
        },
      };
    };
    const want = [
      'cancel/commit-after-ack',
      'cancel/ends-cancelled',
      'cancel/letter-after-ack',
      'cancel/status-moved',
    ];
    expect(await found('cancel', 100, 25, { wrapStore: ignoring }, want)).toEqual(want);
  });

  it('cancel/final-applied: a cancel that overwrites a COMPLETED job (instead of answering finished)', async () => {
    const overwriting = (store: JobStore, db: ModelDb): JobStore => ({
      claim: store.claim.bind(store),
      claimAndComplete: store.claimAndComplete.bind(store),
      renew: store.renew.bind(store),
      checkpoint: store.checkpoint.bind(store),
      complete: store.complete.bind(store),
      release: store.release.bind(store),
      markDead: store.markDead.bind(store),
      get: store.get.bind(store),
      resetForRedrive: store.resetForRedrive.bind(store),
      cancel: (key, request) => {
        if (db.peek(key)?.status === JobStatus.Completed) db.deleteJob(key);
        return (store.cancel as NonNullable<JobStore['cancel']>)(key, request);
      },
    });
    expect(await found('cancel', 100, 27, { wrapStore: overwriting }, ['cancel/final-applied'])).toEqual([
      'cancel/final-applied',
    ]);
  });

  it("rate/over-limit counts a sharded limit whole: a shard's grant is noted under its limit's key", async () => {
    const noted: string[] = [];
    const db = new ModelDb(
      { committed: () => undefined, granted: (key) => noted.push(key) },
      { rateShards: (limit) => limit, random: () => 0.99 },
    );
    const key = 'rate:model.tenant:k:t1';
    for (let i = 0; i < 3; i++) expect(await db.rates.take(key, 3, 5, Date.now())).toEqual({ granted: true });
    expect(await db.rates.take(key, 3, 5, Date.now())).toMatchObject({ granted: false });
    // Three items (shards 2, 0, 1), one limit.
    expect(db.peekLease('rate:#2:model.tenant:k:t1')).toBeDefined();
    expect(db.peekLease(key)).toBeDefined();
    expect(noted).toEqual([key, key, key]);
  });

  it('rate/over-limit: a rate store that grants every take lets more permits through than the window allows', async () => {
    const lavish = (): RateStore => ({ take: async () => ({ granted: true }) });
    expect(await found('rate', 100, 26, { wrapRates: lavish }, ['rate/over-limit'])).toEqual([
      'rate/over-limit',
    ]);
  });
});
