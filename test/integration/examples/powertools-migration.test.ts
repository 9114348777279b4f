import { fileURLToPath } from 'node:url';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sendOrder } from '../../../examples/powertools-migration/producer.ts';
import { destroyAwsClients } from '../../../shared/aws/clients.ts';
import { readDeadLetterAttributes } from '../../../shared/core/adapters/sqs-job-queue.ts';
import { JobStatus } from '../../../shared/core/contract/statuses.ts';
import type { JobRegistry } from '../../../shared/core/model/registry.ts';
import { MetricName } from '../../../shared/core/observe/metric-names.ts';
import { EffectTables } from '../../../shared/jobs/effect-tables.ts';
import { loadJobModule } from '../../../shared/jobs/job-module.ts';
import { provisionLocal } from '../../../shared/local/provision.ts';
import { type CoreEnv, eventually, makeWorker, queueCounts, receiveAll } from '../../support/core-fixture.ts';
import { testClients, uniqueName } from '../../support/env.ts';

// docs/migrate-from-powertools.md's example, run: the job module examples/powertools-migration/jobs.ts,
// loaded as the worker loads it, on a queue its unchanged producer (producer.ts) sends its own JSON to.

const MODULE = fileURLToPath(new URL('../../../examples/powertools-migration/jobs.ts', import.meta.url));

let env: CoreEnv;
let registry: JobRegistry;
let ordersTable: string;

beforeAll(async () => {
  registry = await loadJobModule(MODULE);
  const clients = testClients();
  const provisioned = await provisionLocal({
    clients,
    prefix: uniqueName('ptmig'),
    stackProps: { jobs: registry },
  });
  const o = provisioned.outputs;
  const attrs = await clients.sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: o.JobsQueueUrl, AttributeNames: ['QueueArn'] }),
  );
  ordersTable = provisioned.appTables.orders ?? '';
  env = {
    clients,
    region: await clients.sqs.config.region(),
    queueUrl: o.JobsQueueUrl,
    queueArn: attrs.Attributes?.QueueArn ?? '',
    dlqUrl: o.DlqUrl,
    jobsTable: o.JobsTableName,
    leasesTable: o.LeasesTableName,
    ledgerTable: '',
    close: () => destroyAwsClients(clients),
  };
});
afterAll(() => env?.close());

describe('docs/migrate-from-powertools.md, its example on the emulator', () => {
  it("charges each order once from the producer's own JSON, drops the re-sent order, letters a changed order and a body without the key", async () => {
    // Prepare: the worker of the job module, and the producer's sends as they were under Powertools.
    expect(ordersTable).not.toBe('');
    const worker = makeWorker(env, registry, {
      tables: new EffectTables(env.clients.doc, { orders: ordersTable }),
    });
    const customerId = uniqueName('c');
    const ids = [uniqueName('ord'), uniqueName('ord'), uniqueName('ord')];
    for (const [i, orderId] of ids.entries()) {
      await sendOrder(env.clients.sqs, env.queueUrl, { orderId, customerId, amountCents: 100 * (i + 1) });
    }
    // The producer's retry after a timeout: the same order again.
    await sendOrder(env.clients.sqs, env.queueUrl, { orderId: ids[0] ?? '', customerId, amountCents: 100 });
    // Another producer bug: the same order id with another amount (Powertools' payload validation would
    // raise): dead-lettered payload-mismatch, the charged order untouched.
    const changed = await sendOrder(env.clients.sqs, env.queueUrl, {
      orderId: ids[1] ?? '',
      customerId,
      amountCents: 999,
    });
    // A producer bug: no orderId (the key expression selects nothing).
    const broken = await sendOrder(env.clients.sqs, env.queueUrl, { customerId, amountCents: 5 } as never);

    // Act
    const drained = await eventually(
      async () => {
        await worker.poll(1);
        const c = await queueCounts(env);
        return c.visible + c.inFlight + c.delayed === 0;
      },
      60_000,
      0,
    );

    // Assess: three orders charged once each, under their order ids; the copy dropped; the broken body
    // is in the DLQ with the reason.
    expect(drained).toBe(true);
    for (const [i, orderId] of ids.entries()) {
      const row = await env.clients.doc.send(
        new GetCommand({ TableName: ordersTable, Key: { orderId }, ConsistentRead: true }),
      );
      expect(row.Item).toMatchObject({
        orderId,
        status: 'CHARGED',
        amountCents: 100 * (i + 1),
        chargedBy: orderId,
      });
      expect((await worker.store.get(orderId))?.status).toBe(JobStatus.Completed);
    }
    expect(worker.metrics.get(MetricName.JobSucceeded)).toBe(3);
    const letters = (await receiveAll(env, env.dlqUrl, 30, 2)).map((m) =>
      readDeadLetterAttributes(m.MessageAttributes),
    );
    expect(letters).toHaveLength(2);
    expect(letters).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          reason: 'invalid-plain-key',
          originalMessageId: broken,
          errorMessage: 'InvalidEnvelopeError: plain body: the key path orderId selects nothing',
        }),
        expect.objectContaining({ reason: 'payload-mismatch', originalMessageId: changed }),
      ]),
    );
  }, 120_000);
});
