/**
 * The inspector's DLQ actions against the emulator's real SQS, through the app's routes (the gate as a
 * browser passes it: own Host, the token cookie): a redrive does only what its confirmation showed.
 */
import { ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUiApp } from '../../../cli/ui/app.ts';
import { TOKEN_COOKIE } from '../../../cli/ui/guard.ts';
import { SpanBuffer } from '../../../cli/ui/spans.ts';
import ledgerJobs from '../../../examples/ledger/jobs.ts';
import { DynamoDbJobStore } from '../../../shared/core/adapters/dynamodb-job-store.ts';
import { makeEnvelope } from '../../../shared/core/contract/envelope.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  makeWorker,
  queueCounts,
  receiveAll,
  sendJob,
} from '../../support/core-fixture.ts';
import { uniqueName } from '../../support/env.ts';

const PORT = 8686;
/** The inspector's own host name: its pages answer on it only. */
const HOST = 'actions.leaseq.localhost';
const ORIGIN = `http://${HOST}:${PORT}`;
const token = 'actions-token';
let env: CoreEnv;
let app: ReturnType<typeof createUiApp>;

function appConfig(e: CoreEnv) {
  return {
    target: {
      clients: e.clients,
      names: {
        queueUrl: e.queueUrl,
        dlqUrl: e.dlqUrl,
        jobsTable: e.jobsTable,
        leasesTable: e.leasesTable,
      },
    } as never,
    targetLine: 'test',
    token,
    host: HOST,
    traceToken: 'trace-token',
    port: () => PORT,
    readOnly: false,
    spans: new SpanBuffer(10),
  };
}

beforeAll(async () => {
  env = await coreEnv('cliuiact');
  app = createUiApp(appConfig(env));
});
afterAll(() => env?.close());

type App = ReturnType<typeof createUiApp>;
const sessions = new WeakMap<App, string>();

/** The session cookie of `a`, from trading its printed link as a browser's first visit does. */
async function cookieOf(a: App): Promise<string> {
  const known = sessions.get(a);
  if (known) return known;
  const traded = await a.request(`${ORIGIN}/?token=${token}`, { headers: { host: `${HOST}:${PORT}` } });
  const cookie = (traded.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
  expect(cookie).toMatch(new RegExp(`^${TOKEN_COOKIE}=`));
  sessions.set(a, cookie);
  return cookie;
}

/** A page of `a`, as the browser asks for it (own Host, the session cookie). */
const get = async (a: App, path: string) =>
  a.request(`${ORIGIN}${path}`, { headers: { host: `${HOST}:${PORT}`, cookie: await cookieOf(a) } });

/** A form post to `a`, as the page's own form sends it. */
const postTo = async (a: App, path: string, form: Record<string, string>) =>
  a.request(`${ORIGIN}${path}`, {
    method: 'POST',
    headers: {
      host: `${HOST}:${PORT}`,
      origin: ORIGIN,
      cookie: await cookieOf(a),
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: new URLSearchParams(form).toString(),
  });

async function letter(reason: string): Promise<void> {
  const dedupKey = uniqueName('k');
  const body = JSON.stringify(
    makeEnvelope({ id: uniqueName('job'), dedupKey, type: 'ledger.credit', payload: {} }),
  );
  await env.clients.sqs.send(
    new SendMessageCommand({
      QueueUrl: env.dlqUrl,
      MessageBody: body,
      MessageAttributes: {
        'leaseq.reason': { DataType: 'String', StringValue: reason },
        'leaseq.dedupKey': { DataType: 'String', StringValue: dedupKey },
        'leaseq.type': { DataType: 'String', StringValue: 'ledger.credit' },
      },
    }),
  );
}

const post = (path: string, form: Record<string, string>) => postTo(app, path, form);

const dlqDepth = async () => {
  const q = await queueCounts(env, env.dlqUrl);
  return q.visible + q.inFlight + q.delayed;
};

describe('leaseq ui DLQ actions', () => {
  it('a redrive by reason takes only letters of exactly that reason: a letter whose reason is "*" does not redrive the DLQ', async () => {
    // Anything that can put a message in the DLQ picks its reason attribute; redrive's filter reads a
    // trailing * as a prefix, so `*` would match every letter while the confirmation showed one.
    await letter('*');
    await letter('max-attempts');
    expect(await eventually(async () => (await dlqDepth()) === 2, 10_000, 100)).toBe(true);
    const ask = await post('/dlq/redrive', { reason: '*' });
    const shown = await ask.text();
    const confirmed = await post('/dlq/redrive', { reason: '*', confirmed: 'yes' });
    const done = await confirmed.text();
    expect(shown + done).not.toMatch(/Redrive done[\s\S]*[1-9]\d* redriven/);
    expect(await dlqDepth()).toBe(2);
  });

  it('escapes every field of a job item, numbers included: a hand-written item cannot inject markup', async () => {
    // The pages allow inline scripts (the chart), so one unescaped field would run in the inspector's
    // origin, with its cookie: the item is read as stored, not checked against its type.
    const dedupKey = uniqueName('xss');
    const mark = '<img src=x onerror=alert(1)>';
    await env.clients.doc.send(
      new PutCommand({
        TableName: env.jobsTable,
        Item: {
          dedupKey,
          status: 'DEAD',
          type: 'ledger.credit',
          messageId: 'm-1',
          attempts: mark,
          refunds: mark,
          token: mark,
          owner: 'w-1',
          history: [{ e: 'lease-lost', at: 1, owner: 'w-1', token: mark, why: 'x' }],
          version: 1,
        },
      }),
    );
    const page = await (await get(app, `/jobs/${dedupKey}`)).text();
    expect(page).toContain(dedupKey);
    expect(page).not.toContain('<img');
  });

  it("draws a job's hostile spans posted on 127.0.0.1 as text, and a time past the calendar's end as '-' (the page still answers)", async () => {
    // Any span a job's own code makes reaches the page (the workers export them with the trace token),
    // and so do the item's times as stored: neither may inject markup or take the page down.
    const dedupKey = uniqueName('spans');
    const messageId = uniqueName('m');
    const mark = '</title></text></svg><script>alert(1)</script><img src=x onerror=alert(1)>';
    await env.clients.doc.send(
      new PutCommand({
        TableName: env.jobsTable,
        Item: {
          dedupKey,
          status: 'DEAD',
          type: 'ledger.credit',
          messageId,
          attempts: 1,
          token: 1,
          owner: 'w-1',
          history: [
            { e: 'lease-lost', at: 9_000_000_000_000_000, owner: 'w-1', token: 1, why: 'x' },
            { e: 'reset', at: 1, wasDeadAt: 9_000_000_000_000_000 },
          ],
          version: 1,
        },
      }),
    );
    const hostile = (spanId: string, start: string, end: string) => ({
      traceId: 'e'.repeat(32),
      spanId,
      name: mark,
      startTimeUnixNano: start,
      endTimeUnixNano: end,
      attributes: [
        { key: 'messaging.message.id', value: { stringValue: messageId } },
        { key: 'leaseq.outcome', value: { stringValue: `"><svg onload=alert(1)>` } },
      ],
    });
    const spansPosted = await app.request(`http://127.0.0.1:${PORT}/v1/traces`, {
      method: 'POST',
      headers: {
        host: `127.0.0.1:${PORT}`,
        'content-type': 'application/json',
        'x-leaseq-trace-token': 'trace-token',
      },
      body: JSON.stringify({
        resourceSpans: [
          {
            resource: { attributes: [{ key: 'service.name', value: { stringValue: mark } }] },
            scopeSpans: [
              {
                spans: [
                  hostile('1'.repeat(16), '1700000000000000000', '1700000000012500000'),
                  // A job's code may give its span any start time (the OTel API takes one).
                  hostile('2'.repeat(16), '100000000000000000000000000', '100000000000000000000000001'),
                ],
              },
            ],
          },
        ],
      }),
    });
    expect(spansPosted.status).toBe(200);
    const answer = await get(app, `/jobs/${dedupKey}`);
    const page = await answer.text();
    expect(answer.status, /role="alert">([^<]*)/.exec(page)?.[1]).toBe(200);
    expect(page).toContain('id="waterfall"');
    expect(page).not.toMatch(/<script>alert|<img|<svg onload/);
  });

  it('cancels a job from its page only after the confirmation; a read-only inspector has no button and refuses', async () => {
    // Prepare: a job waiting for its retry.
    const store = new DynamoDbJobStore({ client: env.clients.doc, tableName: env.jobsTable });
    const dedupKey = uniqueName('cancel');
    const now = Date.now();
    const claimed = await store.claim({
      dedupKey,
      owner: 'w-1',
      messageId: 'm-1',
      type: 'ledger.credit',
      createdAt: new Date(now).toISOString(),
      leaseMs: 10_000,
      now,
    });
    if (!claimed.claimed) throw new Error('not claimed');
    await store.release(claimed.lease, now + 60_000, { message: 'boom', errorClass: 'Error' });
    const readOnly = createUiApp({ ...appConfig(env), readOnly: true });

    // Act
    const page = await (await get(app, `/jobs/${dedupKey}`)).text();
    const readOnlyPage = await (await get(readOnly, `/jobs/${dedupKey}`)).text();
    const readOnlyPost = await postTo(readOnly, `/jobs/${dedupKey}/cancel`, { confirmed: 'yes' });
    const ask = await (await post(`/jobs/${dedupKey}/cancel`, {})).text();
    const statusAfterAsk = (await store.get(dedupKey))?.status;
    const done = await (
      await post(`/jobs/${dedupKey}/cancel`, { confirmed: 'yes', reason: 'sent twice' })
    ).text();

    // Assess
    expect(page).toContain('Cancel this job');
    expect(readOnlyPage).not.toContain('Cancel this job');
    expect(readOnlyPost.status).toBe(403);
    expect(ask).toContain('Confirm cancel');
    expect(statusAfterAsk).toBe(JobStatus.RetryWait);
    expect(done).toContain('it was waiting for a retry; the retry will not run');
    const item = await store.get(dedupKey);
    expect(item?.status).toBe(JobStatus.Cancelled);
    expect(item?.history?.at(-1)).toMatchObject({ e: 'cancelled', reason: 'sent twice' });
  });

  it('shows bidi overrides and other controls in error text and reasons escaped, as the CLI prints them', async () => {
    // U+202E turns the rest of a line around: `invoice\u202Egnp.exe` reads as `invoiceexe.png`.
    const dedupKey = uniqueName('bidi');
    const error = 'Error: bad invoice\u202egnp.exe\u2066x\u2069 \u001b[2J';
    await env.clients.doc.send(
      new PutCommand({
        TableName: env.jobsTable,
        Item: {
          dedupKey,
          status: 'DEAD',
          type: 'ledger.credit',
          messageId: 'm-1',
          attempts: 1,
          token: 1,
          owner: 'w-1',
          lastError: error,
          lastErrorClass: 'Error',
          deadReason: 'max-attempts\u202e',
          history: [{ e: 'failed', at: 1, owner: 'w-1', token: 1, error }],
          version: 1,
        },
      }),
    );
    const page = await (await get(app, `/jobs/${dedupKey}`)).text();
    expect(page).toContain(dedupKey);
    expect(page).toContain('bad invoice\\u202egnp.exe\\u2066x\\u2069 \\u001b[2J');
    for (const raw of ['\u202e', '\u2066', '\u2069', '\u001b']) expect(page).not.toContain(raw);
  });

  it('read-only does not receive DLQ messages: a letter stays visible and unreceived; the page lists dead jobs from the problems index', async () => {
    // Receiving a letter hides it for the browse's visibility timeout (a redrive or a consumer then misses
    // it) and counts a receive: a read-only inspector must change nothing.
    const own = await coreEnv('cliuiro');
    try {
      const dedupKey = uniqueName('ro');
      await sendJob(own, {
        dedupKey,
        type: 'ledger.credit',
        payload: { account: uniqueName('a'), amount: 1, simulate: { failTimes: 1 } },
      });
      const worker = makeWorker(own, ledgerJobs, { worker: 'w-ro', maxAttempts: 1 });
      expect(
        await eventually(
          async () => {
            await worker.poll();
            const q = await queueCounts(own, own.dlqUrl);
            return q.visible === 1;
          },
          30_000,
          100,
        ),
      ).toBe(true);
      const readOnly = createUiApp({ ...appConfig(own), readOnly: true });
      // The problems index is eventually consistent: read until it lists the dead job.
      let page = '';
      const listed = await eventually(
        async () => {
          page = await (await get(readOnly, '/dlq')).text();
          return page.includes(dedupKey);
        },
        10_000,
        250,
      );
      expect(listed, page).toBe(true);
      expect(page).toContain('max-attempts');
      // The letter was never received: a receive now gets it at once, for the first time.
      const got = await own.clients.sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: own.dlqUrl,
          WaitTimeSeconds: 2,
          VisibilityTimeout: 0,
          MessageSystemAttributeNames: ['ApproximateReceiveCount'],
        }),
      );
      expect(got.Messages?.length ?? 0).toBe(1);
      expect(got.Messages?.[0]?.Attributes?.ApproximateReceiveCount).toBe('1');
      // A letter's own page would receive it too: read-only refuses it and says why.
      const letterPage = await get(readOnly, `/dlq/letters/${got.Messages?.[0]?.MessageId}`);
      expect(letterPage.status).toBe(403);
      expect(await letterPage.text()).toContain('Read-only');
    } finally {
      own.close();
    }
  });

  it('a redrive of one selected letter acts on that letter, not on another of its dedup key, and lists it once', async () => {
    // Prepare: a DEAD job with two letters of its death (an interrupted dead-lettering sends two); the
    // operator selects the second.
    const dedupKey = uniqueName('pick');
    await env.clients.doc.send(
      new PutCommand({
        TableName: env.jobsTable,
        Item: {
          dedupKey,
          status: JobStatus.Dead,
          type: 'ledger.credit',
          messageId: 'm-dead',
          token: 5,
          attempts: 3,
          version: 6,
          leaseUntil: 0,
        },
      }),
    );
    const body = JSON.stringify(
      makeEnvelope({ id: uniqueName('job'), dedupKey, type: 'ledger.credit', payload: {} }),
    );
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const sent = await env.clients.sqs.send(
        new SendMessageCommand({
          QueueUrl: env.dlqUrl,
          MessageBody: body,
          MessageAttributes: {
            'leaseq.reason': { DataType: 'String', StringValue: 'max-attempts' },
            'leaseq.dedupKey': { DataType: 'String', StringValue: dedupKey },
            'leaseq.type': { DataType: 'String', StringValue: 'ledger.credit' },
            'leaseq.attempts': { DataType: 'Number', StringValue: '3' },
            'leaseq.originalMessageId': { DataType: 'String', StringValue: 'm-dead' },
          },
        }),
      );
      ids.push(sent.MessageId ?? '');
    }
    const [first, selected] = ids;

    // Act
    const done = await (await post('/dlq/redrive', { letter: selected ?? '', confirmed: 'yes' })).text();

    // Assess: the selected letter is gone (sent back), the other stays; the page has one row, for it.
    const left = (await receiveAll(env, env.dlqUrl, 0)).map((m) => m.MessageId);
    expect(left).toContain(first);
    expect(left).not.toContain(selected);
    expect(done).toMatch(/1 letter: 1 redriven, 0 not\./);
    expect(done.match(new RegExp(`>${dedupKey}<`, 'g'))).toHaveLength(1);
    expect(done).toContain(selected);
  });
});
