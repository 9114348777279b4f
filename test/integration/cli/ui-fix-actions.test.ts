/**
 * The inspector's search, payload and fix routes where they meet the rest, against the emulator's real
 * SQS and DynamoDB through the app's routes (the gate as a browser passes it): a fix whose job was
 * cancelled, whose letter went, without a job module, across origins, read-only; a payload the hook
 * redacts is never shown whole nor offered for editing; a key search answers from one read.
 */
import { randomUUID } from 'node:crypto';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUiApp } from '../../../cli/ui/app.ts';
import { TOKEN_COOKIE } from '../../../cli/ui/guard.ts';
import { SpanBuffer } from '../../../cli/ui/spans.ts';
import ledgerJobs from '../../../examples/ledger/jobs.ts';
import { DynamoDbJobStore } from '../../../shared/core/adapters/dynamodb-job-store.ts';
import { S3PayloadStore } from '../../../shared/core/adapters/s3-payload-store.ts';
import { makeEnvelope } from '../../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import { purgeDlq } from '../../../shared/ops/dlq.ts';
import { lettersOfJob } from '../../../shared/ops/job-letters.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  getBalance,
  makeWorker,
  queueCounts,
  sendJob,
} from '../../support/core-fixture.ts';
import { testCredentials, testEndpointOf, uniqueName } from '../../support/env.ts';

const PORT = 8686;
const HOST = 'fix.leaseq.localhost';
const ORIGIN = `http://${HOST}:${PORT}`;
const token = 'fix-token';
const JOBS = { path: 'examples/ledger/jobs.ts', jobs: ledgerJobs };
let env: CoreEnv;

type App = ReturnType<typeof createUiApp>;
function makeApp(extra: Record<string, unknown> = {}): App {
  return createUiApp({
    target: {
      clients: env.clients,
      names: {
        queueUrl: env.queueUrl,
        dlqUrl: env.dlqUrl,
        jobsTable: env.jobsTable,
        leasesTable: env.leasesTable,
      },
    } as never,
    targetLine: 'test',
    token,
    host: HOST,
    traceToken: 'trace-token',
    port: () => PORT,
    readOnly: false,
    spans: new SpanBuffer(10),
    ...extra,
  });
}

const cookies = new WeakMap<App, string>();
async function cookieOf(a: App): Promise<string> {
  const known = cookies.get(a);
  if (known) return known;
  const traded = await a.request(`${ORIGIN}/?token=${token}`, { headers: { host: `${HOST}:${PORT}` } });
  const cookie = (traded.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
  expect(cookie).toMatch(new RegExp(`^${TOKEN_COOKIE}=`));
  cookies.set(a, cookie);
  return cookie;
}
const get = async (a: App, path: string) =>
  a.request(`${ORIGIN}${path}`, { headers: { host: `${HOST}:${PORT}`, cookie: await cookieOf(a) } });
const post = async (
  a: App,
  path: string,
  form: Record<string, string>,
  headers: Record<string, string> = {},
) =>
  a.request(`${ORIGIN}${path}`, {
    method: 'POST',
    headers: {
      host: `${HOST}:${PORT}`,
      origin: ORIGIN,
      cookie: await cookieOf(a),
      'content-type': 'application/x-www-form-urlencoded',
      ...headers,
    },
    body: new URLSearchParams(form).toString(),
  });

/** A dead ledger.credit with its letter in the DLQ; its letter's id. */
async function deadJob(account: string): Promise<{ key: string; letterId: string }> {
  const key = uniqueName('dead');
  await sendJob(env, {
    dedupKey: key,
    type: 'ledger.credit',
    payload: { account, amount: 5, simulate: { failTimes: 1 } },
  });
  const worker = makeWorker(env, ledgerJobs, { worker: 'w-strict', maxAttempts: 1 });
  expect(
    await eventually(
      async () => {
        await worker.poll();
        const q = await queueCounts(env);
        return q.visible + q.inFlight + q.delayed === 0;
      },
      30_000,
      100,
    ),
  ).toBe(true);
  const { letters } = await lettersOfJob(target() as never, key);
  expect(letters.length).toBe(1);
  return { key, letterId: letters[0]?.messageId ?? '' };
}

const target = () => ({
  clients: env.clients,
  names: {
    queueUrl: env.queueUrl,
    dlqUrl: env.dlqUrl,
    jobsTable: env.jobsTable,
    leasesTable: env.leasesTable,
  },
});
const fixed = (account: string) => JSON.stringify({ account, amount: 7 });

beforeAll(async () => {
  env = await coreEnv('cliuifix');
});
afterAll(() => env?.close());

describe('leaseq ui: fix and redrive where it meets the rest', () => {
  it('refuses a fix whose job was cancelled since the form was drawn, and leaves the letter and the job as they are', async () => {
    const app = makeApp({ jobs: JOBS });
    const account = uniqueName('acct');
    const { key, letterId } = await deadJob(account);
    const store = new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable });
    const item = await store.get(key);
    await env.clients.doc.send(
      new PutCommand({ TableName: env.jobsTable, Item: { ...item, status: JobStatus.Cancelled } }),
    );
    for (const confirmed of ['', 'yes']) {
      const answer = await post(app, `/jobs/${key}/fix`, {
        letter: letterId,
        payload: fixed(account),
        confirmed,
      });
      expect(answer.status).toBe(400);
      expect(await answer.text()).toContain('is CANCELLED now');
    }
    expect((await store.get(key))?.status).toBe(JobStatus.Cancelled);
    expect((await lettersOfJob(target() as never, key)).letters.map((l) => l.messageId)).toEqual([letterId]);
  });

  it('says the letter is gone when another operator redrove or purged it, and changes nothing', async () => {
    const app = makeApp({ jobs: JOBS });
    const account = uniqueName('acct');
    const { key, letterId } = await deadJob(account);
    await purgeDlq(env.clients.sqs, env.dlqUrl);
    const answer = await post(app, `/jobs/${key}/fix`, {
      letter: letterId,
      payload: fixed(account),
      confirmed: 'yes',
    });
    expect(answer.status).toBe(404);
    expect(await answer.text()).toContain('no longer in the DLQ');
    expect(
      (await new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable }).get(key))?.status,
    ).toBe(JobStatus.Dead);
  });

  it('takes back a refused edit as the browser sends it (CRLF line ends, a tab pasted): corrected in the form, it passes the checks', async () => {
    const app = makeApp({ jobs: JOBS });
    const account = uniqueName('acct');
    const { key, letterId } = await deadJob(account);
    // What a browser does with a textarea: shows its text, submits its lines joined by CRLF.
    const textarea = (html: string) =>
      (/<textarea[^>]*>([\s\S]*?)<\/textarea>/.exec(html)?.[1] ?? '')
        .replace(/&lt;/g, '<')
        .replace(/&gt;/g, '>')
        .replace(/&quot;/g, '"')
        .replace(/&#39;/g, "'")
        .replace(/&amp;/g, '&');
    const submit = (text: string) => text.replace(/\r?\n/g, '\r\n');
    const shown = textarea(await (await post(app, `/jobs/${key}/reveal`, {})).text());
    expect(shown).toContain('"amount": 5');
    const refused = await post(app, `/jobs/${key}/fix`, {
      letter: letterId,
      payload: submit(shown.replace('"amount": 5', '"amount":\t-1')),
    });
    expect(refused.status).toBe(400);
    const again = textarea(await refused.text());
    expect(again).toContain('"amount":\t-1');
    // The operator corrects the one value in the form given back and sends it again.
    const review = await post(app, `/jobs/${key}/fix`, {
      letter: letterId,
      payload: submit(again.replace('"amount":\t-1', '"amount":\t7')),
    });
    const page = await review.text();
    expect(/id="fix-problem"[^>]*>([^<]*)/.exec(page)?.[1]).toBeUndefined();
    expect(review.status).toBe(200);
    expect(page).toContain(`Redrive job ${key} with this payload?`);
    await purgeDlq(env.clients.sqs, env.dlqUrl);
  });

  it('checks an edit against a schema that validates asynchronously: a payload it refuses is not offered for a redrive', async () => {
    // A Standard Schema whose validate answers with a promise (an async refinement): amount must be > 0.
    const asyncCredit = {
      '~standard': {
        version: 1,
        vendor: 'test',
        validate: async (value: unknown) =>
          typeof (value as { amount?: unknown })?.amount === 'number' &&
          ((value as { amount: number }).amount ?? 0) > 0
            ? { value }
            : { issues: [{ message: 'amount must be above 0', path: ['amount'] }] },
      },
    };
    const jobs = {
      get: (type: string) => {
        const job = ledgerJobs.get(type);
        return job && type === 'ledger.credit' ? { ...job, payload: asyncCredit } : job;
      },
    };
    const app = makeApp({ jobs: { path: 'async-jobs.ts', jobs } });
    const account = uniqueName('acct');
    const { key, letterId } = await deadJob(account);
    const answer = await post(app, `/jobs/${key}/fix`, {
      letter: letterId,
      payload: JSON.stringify({ account, amount: -1 }),
    });
    const page = await answer.text();
    expect(page).not.toContain(`Redrive job ${key} with this payload?`);
    expect(answer.status).toBe(400);
    expect(page).toContain('amount must be above 0');
    const confirmed = await post(app, `/jobs/${key}/fix`, {
      letter: letterId,
      payload: JSON.stringify({ account, amount: -1 }),
      confirmed: 'yes',
    });
    expect(confirmed.status).toBe(400);
    expect((await lettersOfJob(target() as never, key)).letters.map((l) => l.messageId)).toEqual([letterId]);
    await purgeDlq(env.clients.sqs, env.dlqUrl);
  });

  it('a confirmation sent twice at once (a double click, two operators) redrives the letter once: one message on the jobs queue', async () => {
    const app = makeApp({ jobs: JOBS });
    const account = uniqueName('acct');
    const { key, letterId } = await deadJob(account);
    const form = { letter: letterId, payload: fixed(account), confirmed: 'yes' };
    await cookieOf(app);
    const answers = await Promise.all([
      post(app, `/jobs/${key}/fix`, form),
      post(app, `/jobs/${key}/fix`, form),
    ]);
    const pages = await Promise.all(answers.map((a) => a.text()));
    const redriven = pages.filter((p) => p.includes('was redriven with the edited payload')).length;
    expect(redriven).toBe(1);
    const q = await queueCounts(env);
    expect(q.visible + q.inFlight + q.delayed).toBe(1);
    expect((await lettersOfJob(target() as never, key)).letters).toEqual([]);
    const item = await new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable }).get(key);
    expect(item?.status).toBe(JobStatus.RetryWait);
    // The job runs once, with the edited payload.
    const worker = makeWorker(env, ledgerJobs, { worker: 'w-after', maxAttempts: 3 });
    expect(
      await eventually(
        async () => {
          await worker.poll();
          const left = await queueCounts(env);
          return left.visible + left.inFlight + left.delayed === 0;
        },
        30_000,
        100,
      ),
    ).toBe(true);
    expect((await getBalance(env, account))?.balance).toBe(7);
  });

  it('renders a hostile dedup key and payload as text on the reveal, the refused form, the diff and the find results', async () => {
    const app = makeApp({ jobs: JOBS });
    const key = `"><img src=x onerror=alert(1)>${uniqueName('k')}`;
    const account = `</textarea><script>alert(2)</script>\u202e${uniqueName('acct')}`;
    await sendJob(env, {
      dedupKey: key,
      type: 'ledger.credit',
      payload: { account, amount: 5, simulate: { failTimes: 1 } },
    });
    const worker = makeWorker(env, ledgerJobs, { worker: 'w-strict', maxAttempts: 1 });
    await eventually(
      async () => {
        await worker.poll();
        const q = await queueCounts(env);
        return q.visible + q.inFlight + q.delayed === 0;
      },
      30_000,
      100,
    );
    const { letters } = await lettersOfJob(target() as never, key);
    const letterId = letters[0]?.messageId ?? '';
    const path = `/jobs/${encodeURIComponent(key)}`;
    const hostile = (html: string) => {
      expect(html).not.toContain('<img');
      expect(html).not.toContain('<script>alert');
      expect(html).not.toContain('</textarea><script');
      expect(html).not.toContain('\u202e');
    };
    const reveal = await (await post(app, `${path}/reveal`, {})).text();
    expect(reveal).toContain('id="fix-payload"');
    hostile(reveal);
    const refused = await post(app, `${path}/fix`, {
      letter: letterId,
      payload: JSON.stringify({ account, amount: -1 }),
    });
    expect(refused.status).toBe(400);
    hostile(await refused.text());
    const review = await post(app, `${path}/fix`, {
      letter: letterId,
      payload: JSON.stringify({ account: `${account}<img src=y>`, amount: 7 }),
    });
    const diff = await review.text();
    expect(diff).toContain('id="fix-diff"');
    hostile(diff);
    hostile(await (await post(app, `/dlq/letters/${letterId}`, {})).text());
    const found = await get(app, `/find?q=${encodeURIComponent(key)}`);
    expect(found.headers.get('location')).toBe(path);
    await purgeDlq(env.clients.sqs, env.dlqUrl);
  });

  it('without a job module offers no edit and refuses one: the schema check cannot run', async () => {
    const app = makeApp();
    const account = uniqueName('acct');
    const { key, letterId } = await deadJob(account);
    const reveal = await (await post(app, `/jobs/${key}/reveal`, {})).text();
    expect(reveal).toContain(account);
    expect(reveal).not.toContain('id="fix-payload"');
    expect(reveal).toContain('No job module');
    const answer = await post(app, `/jobs/${key}/fix`, {
      letter: letterId,
      payload: fixed(account),
      confirmed: 'yes',
    });
    expect(answer.status).toBe(400);
    expect((await lettersOfJob(target() as never, key)).letters.length).toBe(1);
    await purgeDlq(env.clients.sqs, env.dlqUrl);
  });

  it("shows a payload the deployment's hook redacts only redacted, on the job's and the letter's pages, and offers no edit of it", async () => {
    const redact = (text: string) => text.replace(/acct-[a-z0-9]+/g, '[account]');
    const app = makeApp({ jobs: JOBS, redact });
    const account = uniqueName('acct');
    const { key, letterId } = await deadJob(account);
    const reveal = await (await post(app, `/jobs/${key}/reveal`, {})).text();
    expect(reveal).toContain('[account]');
    expect(reveal).toContain('redacted');
    expect(reveal).not.toContain(account);
    expect(reveal).not.toContain('id="fix-payload"');
    const letter = await (await post(app, `/dlq/letters/${letterId}`, {})).text();
    expect(letter).toContain('[account]');
    expect(letter).not.toContain(account);
    // A form made by hand is refused too: its diff would show the payload whole.
    const answer = await post(app, `/jobs/${key}/fix`, { letter: letterId, payload: fixed(account) });
    expect(answer.status).toBe(400);
    expect(await answer.text()).not.toContain(`"${account}"`);
    await purgeDlq(env.clients.sqs, env.dlqUrl);
  });

  it("shows a letter's body no more than its payload: a hook written for the indented JSON it is given redacts the body too", async () => {
    // The hook gets the indented JSON text (docs/ui.md), so one may match `"key": "value"` with its space.
    const redact = (text: string) => text.replace(/"account": "[^"]*"/g, '"account": "[account]"');
    const app = makeApp({ jobs: JOBS, redact });
    const account = uniqueName('acct');
    const { letterId } = await deadJob(account);
    const letter = await (await post(app, `/dlq/letters/${letterId}`, {})).text();
    expect(letter).toContain('[account]');
    expect(letter).not.toContain(account);
    // One that matches the payload's own text only (its top level, two spaces in) misses it in the body:
    // the body is withheld.
    const narrow = makeApp({
      jobs: JOBS,
      redact: (text: string) => text.replace(/^ {2}"account": "[^"]*"/m, '  "account": "[account]"'),
    });
    const withheld = await (await post(narrow, `/dlq/letters/${letterId}`, {})).text();
    expect(withheld).toContain('[account]');
    expect(withheld).toContain('the body holds the payload');
    expect(withheld).not.toContain(account);
    await purgeDlq(env.clients.sqs, env.dlqUrl);
  });

  it('takes no reveal or fix without the session, from another origin, or (the fix) when read-only', async () => {
    const app = makeApp({ jobs: JOBS });
    const readOnly = makeApp({ jobs: JOBS, readOnly: true });
    const form = new URLSearchParams({ letter: 'm-1', payload: '{}', confirmed: 'yes' }).toString();
    for (const path of ['/jobs/k/fix', '/jobs/k/reveal', '/dlq/letters/m-1']) {
      const bare = await app.request(`${ORIGIN}${path}`, {
        method: 'POST',
        headers: { host: `${HOST}:${PORT}`, 'content-type': 'application/x-www-form-urlencoded' },
        body: form,
      });
      expect(bare.status, path).toBe(403);
      const foreign = await post(
        app,
        path,
        { letter: 'm-1', payload: '{}', confirmed: 'yes' },
        { origin: 'http://evil.example' },
      );
      expect(foreign.status, path).toBe(403);
    }
    expect(
      (await post(readOnly, '/jobs/k/fix', { letter: 'm-1', payload: '{}', confirmed: 'yes' })).status,
    ).toBe(403);
    // The search answers its operator only: no session, no answer (not even whether a key exists).
    for (const q of ['k', 'status:DEAD']) {
      const bare = await app.request(`${ORIGIN}/find?q=${encodeURIComponent(q)}`, {
        headers: { host: `${HOST}:${PORT}` },
      });
      expect(bare.status, q).toBe(403);
      expect(bare.headers.get('location'), q).toBeNull();
    }
  });

  it('answers a key search from one read: the job when there is one, a 404 that says so when not; filters need the index', async () => {
    const app = makeApp();
    const key = uniqueName('done');
    await new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable }).claim({
      dedupKey: key,
      owner: 'w',
      messageId: uniqueName('m'),
      type: 'ledger.credit',
      createdAt: new Date().toISOString(),
      leaseMs: 1000,
      now: Date.now(),
    });
    const found = await get(app, `/find?q=${encodeURIComponent(key)}`);
    expect(found.status).toBe(303);
    expect(found.headers.get('location')).toBe(`/jobs/${encodeURIComponent(key)}`);
    const none = await get(app, `/find?q=${encodeURIComponent(`${key}-x`)}`);
    expect(none.status).toBe(404);
    expect(await none.text()).toContain('No job has the dedup key');
    const bad = await get(app, `/find?q=${encodeURIComponent('status:DONE')}`);
    expect(bad.status).toBe(400);
    const badCursor = await get(app, `/find?q=${encodeURIComponent('status:DEAD')}&cursor=nope`);
    expect(badCursor.status).toBe(400);
    expect(await badCursor.text()).toContain('cursor is not one a listing returned');
  });

  it('shows a payload offloaded to S3 from its object with --payload-bucket, and names the object without it', async () => {
    const s3 = new S3Client({
      region: env.region,
      endpoint: testEndpointOf('s3'),
      forcePathStyle: true,
      credentials: testCredentials(),
    });
    try {
      const bucket = uniqueName('uipayloads').toLowerCase().replace(/_/g, '-');
      await s3.send(new CreateBucketCommand({ Bucket: bucket }));
      const payloads = new S3PayloadStore({ bucket, client: s3 });
      const account = uniqueName('acct');
      const ref = await payloads.put(
        `payloads/2026-12-03/${randomUUID()}.json`,
        JSON.stringify({ account, amount: 3 }),
      );
      const key = uniqueName('big');
      const { payload: _none, ...pointer } = makeEnvelope({
        id: uniqueName('job'),
        dedupKey: key,
        type: 'ledger.credit',
        payload: null,
      });
      await env.clients.sqs.send(
        new SendMessageCommand({
          QueueUrl: env.dlqUrl,
          MessageBody: JSON.stringify({ ...pointer, payloadRef: ref }),
          MessageAttributes: {
            'leaseq.reason': { DataType: 'String', StringValue: 'max-attempts' },
            'leaseq.dedupKey': { DataType: 'String', StringValue: key },
            'leaseq.type': { DataType: 'String', StringValue: 'ledger.credit' },
          },
        }),
      );
      const shown = await (await post(makeApp({ payloadStore: payloads }), `/jobs/${key}/reveal`, {})).text();
      expect(shown).toContain(account);
      expect(shown).toContain(`offloaded to s3://${bucket}/${ref.key}`);
      expect(shown).toContain(`(${ref.bytes} bytes`);
      const named = await (await post(makeApp(), `/jobs/${key}/reveal`, {})).text();
      expect(named).not.toContain(account);
      expect(named).toContain(`--payload-bucket ${bucket}`);
      await purgeDlq(env.clients.sqs, env.dlqUrl);
    } finally {
      s3.destroy();
    }
  });
});
