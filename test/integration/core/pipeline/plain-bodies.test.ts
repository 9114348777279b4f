import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readDeadLetterAttributes } from '../../../../shared/core/adapters/sqs-job-queue.ts';
import { makeEnvelope } from '../../../../shared/core/contract/envelope.ts';
import type { PlainBodies } from '../../../../shared/core/contract/plain-body.ts';
import { JobStatus } from '../../../../shared/core/contract/statuses.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { redrive } from '../../../../shared/ops/dlq-redrive.ts';
import { inspectJob } from '../../../../shared/ops/inspect.ts';
import type { OpsTarget } from '../../../../shared/ops/target.ts';
import {
  type CoreEnv,
  coreEnv,
  eventually,
  getBalance,
  makeWorker,
  queueCounts,
  receiveAll,
  sendRaw,
  type Worker,
} from '../../../support/core-fixture.ts';
import { uniqueName } from '../../../support/env.ts';
import { freshQueues } from '../../../support/fresh-queues.ts';
import { RunLog, testRegistry } from '../../../support/test-jobs.ts';

// A queue whose producers send their own JSON (no leaseq producer, no envelope), read by a real worker on
// the emulator's SQS and DynamoDB through the job set's plainBodies (docs/envelope.md, "Plain bodies").

let env: CoreEnv;

beforeAll(async () => {
  env = await coreEnv('plain');
});
afterAll(() => env?.close());

const targetOf = (e: CoreEnv): OpsTarget => ({
  clients: e.clients,
  names: { queueUrl: e.queueUrl, dlqUrl: e.dlqUrl, jobsTable: e.jobsTable, leasesTable: e.leasesTable },
});

/** The test set's test.credit, reading plain bodies by `plainBodies`. */
function plainRegistry(e: CoreEnv, plainBodies: PlainBodies) {
  const log = new RunLog();
  const credit = testRegistry(e, log).registry.get('test.credit');
  if (!credit) throw new Error('test.credit is not in the test registry');
  return { registry: JobRegistry.of([credit], { plainBodies }), log };
}

async function drain(e: CoreEnv, worker: Worker): Promise<void> {
  const drained = await eventually(
    async () => {
      await worker.poll(1);
      const c = await queueCounts(e);
      return c.visible + c.inFlight + c.delayed === 0;
    },
    60_000,
    0,
  );
  expect(drained, 'the queue drains').toBe(true);
}

/** Each letter's reason attributes by the id of the message that was dead-lettered. */
async function lettersById(
  e: CoreEnv,
  visibility = 30,
): Promise<Map<string, Record<string, string | undefined>>> {
  const letters = await receiveAll(e, e.dlqUrl, visibility, 2);
  return new Map(
    letters.map((m) => {
      const attributes = readDeadLetterAttributes(m.MessageAttributes);
      return [attributes.originalMessageId ?? '', { ...attributes, body: m.Body }] as const;
    }),
  );
}

describe('Plain bodies on the emulator', () => {
  it("runs a producer's own JSON once per key, drops its duplicate, dead-letters bad bodies with the reason, and an envelope shares the queue", async () => {
    // Prepare: the producer's JSON is an order event; the key is its order id, the payload its part `order`.
    const account = uniqueName('acct');
    const { registry, log } = plainRegistry(env, {
      type: 'test.credit',
      key: 'order.id',
      payload: (doc: unknown) => {
        const { order } = doc as { order: { account: string; amount: number; failTimes?: number } };
        return {
          account: order.account,
          amount: order.amount,
          ...(order.failTimes ? { failTimes: order.failTimes } : {}),
        };
      },
    });
    const worker = makeWorker(env, registry);
    // Each order credits an account of its own: a run is then never repeated by a conflict with another.
    const order = (id: string, amount: number, extra: Record<string, unknown> = {}) =>
      JSON.stringify({ event: 'OrderPlaced', order: { id, account: `${account}-${id}`, amount, ...extra } });
    const [o1, o2, o3] = [uniqueName('o'), uniqueName('o'), uniqueName('o')];
    await sendRaw(env, order(o1, 1));
    await sendRaw(env, order(o2, 10, { failTimes: 1 }));
    await sendRaw(env, order(o1, 1)); // the producer's retry: the same order again
    const envelopeKey = uniqueName('env');
    await sendRaw(
      env,
      JSON.stringify(
        makeEnvelope({
          id: 'e',
          dedupKey: envelopeKey,
          type: 'test.credit',
          payload: { account, amount: 100 },
        }),
      ),
    );
    const notJson = await sendRaw(env, 'order=1;amount=5');
    const noKey = await sendRaw(
      env,
      JSON.stringify({ event: 'OrderPlaced', order: { account, amount: 1000 } }),
    );
    await sendRaw(env, order(o3, 1000, { amount: 'lots' })); // its payload fails the schema

    // Act
    await drain(env, worker);

    // Assess: o1 ran once (the copy dropped), o2 after one retry, the envelope as ever.
    expect((await getBalance(env, `${account}-${o1}`))?.balance).toBe(1);
    expect((await getBalance(env, `${account}-${o2}`))?.balance).toBe(10);
    expect((await getBalance(env, account))?.balance).toBe(100);
    expect(log.count(o1)).toBe(1);
    expect(log.count(o2)).toBe(2);
    expect(worker.metrics.get('DuplicateSkipped')).toBeGreaterThanOrEqual(1);
    for (const key of [o1, o2, envelopeKey])
      expect((await worker.store.get(key))?.status).toBe(JobStatus.Completed);
    // inspect reads the plain job like any other: its history has the failed attempt.
    const inspected = await inspectJob(targetOf(env), o2);
    expect(inspected?.job).toMatchObject({ status: JobStatus.Completed, type: 'test.credit', attempts: 2 });
    const letters = await lettersById(env);
    expect(letters.get(notJson)).toMatchObject({ reason: 'invalid-not-json', attempts: '0' });
    expect(letters.get(notJson)?.errorMessage).toContain("a JSON body this queue's plainBodies read");
    expect(letters.get(noKey)).toMatchObject({
      reason: 'invalid-plain-key',
      errorMessage: 'InvalidEnvelopeError: plain body: the key path order.id selects nothing',
    });
    const badPayload = [...letters.values()].find((l) => l.dedupKey === o3);
    expect(badPayload).toMatchObject({ reason: 'invalid-bad-payload', type: 'test.credit' });
    expect(letters.size).toBe(3);
    // The letters keep the producer's bodies as sent.
    expect(letters.get(noKey)?.body).toContain('"OrderPlaced"');
  }, 180_000);

  it('unwraps an SNS notification and an EventBridge event on one queue, and redrives a dead plain job with an edited payload', async () => {
    // Prepare: a queue that an SNS topic (without raw delivery) and an EventBridge rule both send to.
    const e = await freshQueues(env);
    const account = uniqueName('acct');
    const { registry, log } = plainRegistry(e, {
      unwrap: ['sns', 'eventbridge'],
      type: 'test.credit',
      key: 'orderId',
      payload: 'credit',
    });
    const worker = makeWorker(e, registry);
    const [viaSns, viaEvents, dies] = [uniqueName('sns'), uniqueName('eb'), uniqueName('dies')];
    const sns = (inner: { orderId: string; credit: object }) =>
      JSON.stringify({
        Type: 'Notification',
        MessageId: '0c6a94b2-1f0e-5b8e-9a3e-6f0d2d1c8a11',
        TopicArn: 'arn:aws:sns:eu-west-1:111122223333:orders',
        Message: JSON.stringify(inner),
        Timestamp: new Date().toISOString(),
        SignatureVersion: '1',
      });
    await sendRaw(e, sns({ orderId: viaSns, credit: { account: `${account}-sns`, amount: 1 } }));
    // SNS delivers a copy now and then: the same notification twice.
    await sendRaw(e, sns({ orderId: viaSns, credit: { account: `${account}-sns`, amount: 1 } }));
    await sendRaw(
      e,
      JSON.stringify({
        version: '0',
        id: '5f3c1c55-7c2a-4d1e-8c4b-2b3e6f7a9d10',
        'detail-type': 'OrderPlaced',
        source: 'shop.orders',
        account: '111122223333',
        time: new Date().toISOString(),
        region: 'eu-west-1',
        resources: [],
        detail: { orderId: viaEvents, credit: { account: `${account}-eb`, amount: 10 } },
      }),
    );
    await sendRaw(e, sns({ orderId: dies, credit: { account, amount: 100, permanent: true } }));
    const raw = await sendRaw(
      e,
      JSON.stringify({ orderId: uniqueName('raw'), credit: { account, amount: 1 } }),
    );

    // Act
    await drain(e, worker);

    // Assess: each ran once; the permanent failure is DEAD with a letter naming its key and type; a body of
    // neither carrier is refused.
    expect((await getBalance(e, `${account}-sns`))?.balance).toBe(1);
    expect((await getBalance(e, `${account}-eb`))?.balance).toBe(10);
    expect([log.count(viaSns), log.count(viaEvents)]).toEqual([1, 1]);
    expect((await worker.store.get(dies))?.status).toBe(JobStatus.Dead);
    const letters = await lettersById(e, 5);
    expect(letters.get(raw)).toMatchObject({ reason: 'invalid-plain-shape' });
    const dead = [...letters.values()].find((l) => l.dedupKey === dies);
    expect(dead).toMatchObject({ reason: 'permanent-error', type: 'test.credit' });

    // Act: the operator redrives the dead job with a corrected payload (once the letters read above show again).
    await new Promise((r) => setTimeout(r, 6_000));
    const report = await redrive(targetOf(e), {
      filter: { dedupKey: dies },
      by: 'ops@test',
      payload: { value: { account, amount: 100 } },
    });
    expect(report).toMatchObject({ redriven: 1 });
    await drain(e, worker);

    // Assess: the redriven job ran under its key, with the edited payload.
    expect((await worker.store.get(dies))?.status).toBe(JobStatus.Completed);
    expect((await getBalance(e, account))?.balance).toBe(100);
  }, 240_000);
});
