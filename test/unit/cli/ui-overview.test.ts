/**
 * The overview's refresh against the in-memory DynamoDB (its request tally and fault injection) and a
 * counted stand-in for SQS's GetQueueAttributes: a fixed number of requests whatever the table's size,
 * tiles and lists from the same reads, one read at a time, the reads aborted when the page goes away,
 * and a throttled store said so.
 */
import { describe, expect, it } from 'vitest';
import { createUiApp } from '../../../cli/ui/app.ts';
import { TOKEN_COOKIE } from '../../../cli/ui/guard.ts';
import { readOverview } from '../../../cli/ui/overview-data.ts';
import type { OverviewFigures } from '../../../cli/ui/overview-figures.ts';
import { SpanBuffer } from '../../../cli/ui/spans.ts';
import {
  PROBLEM_AT_ATTRIBUTE,
  PROBLEM_SHARD_ATTRIBUTE,
  problemShard,
} from '../../../shared/core/contract/job-history.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { InMemoryDynamoDb, leaseqTables } from '../../../shared/testing/index.ts';

const HOST = 'overview.leaseq.localhost';
const PORT = 8686;
const ORIGIN = `http://${HOST}:${PORT}`;
const names = {
  queueUrl: 'http://q/jobs',
  dlqUrl: 'http://q/dlq',
  jobsTable: 'app-jobs',
  leasesTable: 'app-leases',
};

/** GetQueueAttributes of two queues, counted. */
class CountedSqs {
  requests = 0;
  async send(command: { input: { QueueUrl?: string } }) {
    this.requests += 1;
    const dlq = command.input.QueueUrl === names.dlqUrl;
    return {
      Attributes: {
        ApproximateNumberOfMessages: dlq ? '2' : '5',
        ApproximateNumberOfMessagesNotVisible: '3',
        ApproximateNumberOfMessagesDelayed: '0',
      },
    };
  }
}

/** A jobs table of `completed` jobs that completed first time (not in the index) plus the same few others. */
function store(completed: number) {
  const db = new InMemoryDynamoDb({
    tables: leaseqTables({ jobs: names.jobsTable, leases: names.leasesTable }),
  });
  const now = Date.now();
  for (let i = 0; i < completed; i++) {
    db.seed(names.jobsTable, {
      dedupKey: `done-${i}`,
      status: JobStatus.Completed,
      leaseUntil: now - 60_000,
      token: 1,
      attempts: 1,
      owner: `w-${i % 3}`,
      type: 'order.ship',
      createdAt: new Date(now - 120_000).toISOString(),
      updatedAt: now - 60_000,
      payload: { order: i, lines: ['a', 'b', 'c'] },
    });
  }
  const problem = (dedupKey: string, item: Record<string, unknown>) =>
    db.seed(names.jobsTable, {
      dedupKey,
      token: 2,
      type: 'order.ship',
      [PROBLEM_SHARD_ATTRIBUTE]: problemShard(dedupKey),
      [PROBLEM_AT_ATTRIBUTE]: now - 30_000,
      ...item,
    });
  problem('dead-1', {
    status: JobStatus.Dead,
    leaseUntil: now - 30_000,
    attempts: 3,
    deadReason: 'max-attempts',
  });
  problem('dead-2', {
    status: JobStatus.Dead,
    leaseUntil: now - 30_000,
    attempts: 3,
    deadReason: 'max-attempts',
  });
  problem('waiting-1', {
    status: JobStatus.RetryWait,
    leaseUntil: now + 30_000,
    attempts: 1,
    updatedAt: now,
  });
  // A retried job running now (its lease in the future) and one whose worker died an hour ago.
  problem('running-1', {
    status: JobStatus.InProgress,
    leaseUntil: now + 30_000,
    attempts: 2,
    owner: 'w-1',
    claimedAt: now,
    updatedAt: now,
  });
  problem('stuck-1', {
    status: JobStatus.InProgress,
    leaseUntil: now - 3_600_000,
    attempts: 2,
    owner: 'w-gone',
    claimedAt: now - 3_600_000,
    updatedAt: now - 3_600_000,
  });
  return db;
}

function inspector(db: InMemoryDynamoDb, sqs = new CountedSqs()) {
  const app = createUiApp({
    target: { clients: { doc: db, sqs }, names } as never,
    targetLine: 'test',
    token: 'tok',
    host: HOST,
    traceToken: 'trace',
    port: () => PORT,
    readOnly: false,
    spans: new SpanBuffer(10),
    timeoutMs: 2000,
  });
  let cookie: string | undefined;
  const get = async (path: string, init: RequestInit = {}) => {
    if (!cookie) {
      const traded = await app.request(`${ORIGIN}/?token=tok`, { headers: { host: `${HOST}:${PORT}` } });
      cookie = (traded.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
      expect(cookie).toMatch(new RegExp(`^${TOKEN_COOKIE}=`));
    }
    return app.request(`${ORIGIN}${path}`, { ...init, headers: { host: `${HOST}:${PORT}`, cookie } });
  };
  return { app, get, sqs };
}

/** What /api/overview answers. */
type Answer = OverviewFigures & {
  tiles: { id: string; text: string | null }[];
  html: Record<string, string | null>;
};
const answerOf = async (r: Response) => (await r.json()) as Answer;

const requests = (db: InMemoryDynamoDb) => Object.values(db.tally()).reduce((sum, t) => sum + t.requests, 0);
const readUnits = (db: InMemoryDynamoDb) =>
  Object.values(db.tally()).reduce((sum, t) => sum + t.readUnits, 0);

describe('leaseq ui overview: bounded reads', () => {
  it('one refresh costs the same requests on a jobs table of 100 and of 100,000 items', async () => {
    const cost: { dynamodb: number; sqs: number; units: number }[] = [];
    for (const size of [100, 100_000]) {
      const db = store(size);
      const ui = inspector(db);
      await ui.get('/?token=tok'); // the session; then only the refresh is counted
      db.resetTally();
      ui.sqs.requests = 0;
      const answer = await ui.get('/api/overview');
      expect(answer.status).toBe(200);
      cost.push({ dynamodb: requests(db), sqs: ui.sqs.requests, units: readUnits(db) });
    }
    expect(cost[1]?.dynamodb).toBe(cost[0]?.dynamodb);
    expect(cost[1]?.sqs).toBe(cost[0]?.sqs);
    // 2 GetQueueAttributes; 16 index shard queries, a page of the jobs table and one of the leases table.
    expect(cost[0]).toMatchObject({ dynamodb: 18, sqs: 2 });
    // Read units are bounded too: a page of at most 200 summary items.
    expect(cost[1]?.units).toBeLessThan(20);
  }, 120_000);

  it('tiles and lists come from the same reads; a small table gives exact figures, a big one lower bounds', async () => {
    const small = await answerOf(await inspector(store(100)).get('/api/overview'));
    expect(small.jobs).toMatchObject({
      complete: true,
      live: { n: 1 },
      stuck: { n: 1 },
      dead: { n: 2 },
      retryWait: { n: 1 },
    });
    expect(small.jobs?.summary?.byStatus).toMatchObject({
      COMPLETED: 100,
      DEAD: 2,
      RETRY_WAIT: 1,
      IN_PROGRESS: 2,
    });
    expect(small.leases?.map((l) => l.dedupKey).sort()).toEqual(['running-1', 'stuck-1']);
    const tile = (a: Answer, id: string) => a.tiles.find((t) => t.id === id)?.text;
    expect(tile(small, 'c-live')).toBe('1');
    expect(small.html['o-leases']).toContain('running-1');

    const big = await answerOf(await inspector(store(100_000)).get('/api/overview'));
    // The problem jobs are all found through the index; the live and stuck counts are lower bounds.
    expect(big.jobs).toMatchObject({ complete: false, sampled: 200, dead: { n: 2 }, retryWait: { n: 1 } });
    expect(big.jobs?.live).toEqual({ n: 1, atLeast: true });
    expect(tile(big, 'c-live')).toBe('≥ 1');
    expect(tile(big, 'c-stuck')).toBe('≥ 1');
    expect(big.leases?.map((l) => l.dedupKey).sort()).toEqual(['running-1', 'stuck-1']);
    expect(big.html['o-statuses']).toContain('more than the 200 items one refresh reads');
  }, 120_000);

  it('refreshes asked for while one runs share its reads; a refresh whose page went away aborts them', async () => {
    const db = store(100);
    const ui = inspector(db);
    await ui.get('/?token=tok');
    await new Promise((resolve) => setTimeout(resolve, 1100)); // past the reuse of the page's own read
    db.resetTally();
    db.faults.delayNext('*', 300, { times: 18 });
    const answers = await Promise.all([1, 2, 3, 4, 5].map(() => ui.get('/api/overview')));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    expect(requests(db)).toBe(18);

    // Every page waiting goes away: the read is aborted, its requests with it (each answer here would
    // take 5 s), and the next refresh reads afresh.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    db.faults.clear();
    db.faults.delayNext('*', 5000, { times: 18 });
    const stop = new AbortController();
    const started = Date.now();
    const read = readOverview(
      { clients: { doc: db, sqs: new CountedSqs() }, names } as never,
      10_000,
      stop.signal,
    );
    setTimeout(() => stop.abort(new Error('the page went away')), 100);
    const snapshot = await read;
    expect(Date.now() - started).toBeLessThan(1000);
    expect(snapshot.sample.ok).toBe(false);
    expect(snapshot.index.ok).toBe(false);
    const gone = new AbortController();
    setTimeout(() => gone.abort(), 100);
    db.faults.delayNext('*', 5000, { times: 18 });
    const answer = await ui.get('/api/overview', { signal: gone.signal }).catch(() => undefined);
    expect(answer?.status ?? 499).toBe(499);
    expect(Date.now() - started).toBeLessThan(2000);
  }, 30_000);

  it('a throttled store is said to throttle; the queue figures still show', async () => {
    const db = store(100);
    const ui = inspector(db);
    db.faults.failNext('*', 'throttle', { times: 1000 });
    const answer = await answerOf(await ui.get('/api/overview'));
    expect(answer.problems.join('\n')).toMatch(
      /DynamoDB throttling: sample of the jobs table .* failed \(ProvisionedThroughputExceededException/,
    );
    expect(answer.queue).toEqual({ visible: 5, inFlight: 3, delayed: 0 });
    expect(answer.jobs).toBeNull();
    expect(answer.html['o-leases']).toBeNull();
  });

  it("counts named leases without the rate limits' permit items that share their table", async () => {
    const db = store(10);
    const now = Date.now();
    for (let i = 0; i < 5; i++) db.seed(names.leasesTable, { leaseKey: `rate:api#${i}`, permits: 3 });
    db.seed(names.leasesTable, {
      leaseKey: 'ledger-lock',
      owner: 'w-gone',
      token: 4,
      leaseUntil: now - 60_000,
    });
    db.seed(names.leasesTable, { leaseKey: 'report-lock', owner: 'w-1', token: 1, leaseUntil: now + 60_000 });
    const answer = await answerOf(await inspector(db).get('/api/overview'));
    expect(answer.named).toEqual({
      held: 1,
      abandoned: 1,
      free: 0,
      abandonedKeys: ['ledger-lock'],
      complete: true,
    });
    expect(answer.html['o-named']).toContain('1 abandoned named lease');
  });

  it('a jobs table made before the problems index: figures from the sample, no banner', async () => {
    const db = new InMemoryDynamoDb({
      tables: [
        { name: names.jobsTable, partitionKey: { name: 'dedupKey', type: 'S' } },
        { name: names.leasesTable, partitionKey: { name: 'leaseKey', type: 'S' } },
      ],
    });
    const now = Date.now();
    db.seed(names.jobsTable, {
      dedupKey: 'd',
      status: JobStatus.Dead,
      leaseUntil: now,
      token: 1,
      attempts: 3,
    });
    const answer = await answerOf(await inspector(db).get('/api/overview'));
    expect(answer.problems).toEqual([]);
    expect(answer.jobs).toMatchObject({ complete: true, dead: { n: 1 } });
  });
});
