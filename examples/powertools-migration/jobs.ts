// The job module of docs/migrate-from-powertools.md: the order handler a team ran under Powertools'
// makeIdempotent (keyed by `eventKeyJmesPath: 'orderId'`) and BatchProcessor, moved to leaseq without
// touching its producers. The queue's bodies stay the producers' own JSON ({ orderId, customerId,
// amountCents }); plainBodies reads them with the same key expression. Its test, which runs this module
// on the emulator: test/integration/examples/powertools-migration.test.ts.
import * as z from 'zod';
import { defineJob, defineJobs, defineTable } from '../../shared/index.ts';

/** The application table the handler wrote before, and still writes: one item per order. */
export const ordersTable = defineTable('orders', { partitionKey: 'orderId' });

/** An order as the producers send it (unchanged by the migration). */
export const order = z.object({
  orderId: z.string().min(1).max(128),
  customerId: z.string().min(1),
  amountCents: z.number().int().positive(),
});
export type Order = z.infer<typeof order>;

/**
 * `orders.charge`: records the charge of one order. Its one effect is committed in the same fenced
 * transaction that marks the job COMPLETED, so it is applied once however often the message comes; on
 * the one-write fast path (no claim before the run) a unique order costs one transaction.
 */
export const chargeOrder = defineJob({
  type: 'orders.charge',
  payload: order,
  tables: { orders: ordersTable },
  fastPath: true,
  async run(ctx, o) {
    return {
      effects: [
        ctx.tables.orders.put({
          orderId: o.orderId,
          customerId: o.customerId,
          amountCents: o.amountCents,
          status: 'CHARGED',
          chargedBy: ctx.dedupKey,
        }),
      ],
      result: { charged: o.amountCents },
    };
  },
});

/**
 * Every body on the queue is an order: one fixed type, keyed by the expression the Powertools handler
 * used (`orderId`), the whole body as payload.
 */
export default defineJobs([chargeOrder], {
  plainBodies: { type: 'orders.charge', key: 'orderId' },
});
