import type { InitializeMiddleware, MiddlewareStack } from '@smithy/types';
import type { AwsClients } from '../../shared/aws/clients.ts';

/** DynamoDB capacity one worker consumed, by source. */
export interface CapacityTotals {
  /** Write request units, reported plus computed. */
  readonly wru: number;
  /** Read request units, reported plus computed. */
  readonly rru: number;
  /** Units the store reported (`ReturnConsumedCapacity: TOTAL`). */
  readonly reportedWru: number;
  readonly reportedRru: number;
  /** Units computed by DynamoDB's billing rules for refused writes, which report none. */
  readonly computedWru: number;
  /**
   * Read units computed for batch reads the emulator answers without capacity (MiniStack and
   * BatchGetItem): 0.5 per key asked for (1 when consistent), each item under 4 KB. Included in `rru`.
   */
  readonly computedRru?: number;
  /** Requests that reported capacity, and refused writes that were computed. */
  readonly reportedRequests: number;
  readonly computedRequests: number;
  /** Units by command (`UpdateItem`, `TransactWriteItems`, ...), reported plus computed. */
  readonly byCommand: Readonly<Record<string, { readonly wru: number; readonly rru: number }>>;
}

const WRITES = new Set(['PutItem', 'UpdateItem', 'DeleteItem', 'TransactWriteItems', 'BatchWriteItem']);
const READS = new Set(['GetItem', 'Query', 'Scan', 'TransactGetItems', 'BatchGetItem']);

type AttributeValue = Record<string, unknown>;

/** Size of one attribute value by DynamoDB's item-size rules (names and values in UTF-8 bytes). */
function valueSize(value: AttributeValue): number {
  const [type, v] = Object.entries(value)[0] ?? ['NULL', true];
  switch (type) {
    case 'S':
      return Buffer.byteLength(String(v), 'utf8');
    case 'N': {
      const digits = String(v).replace(/[-.]/g, '').replace(/^0+/, '');
      return Math.ceil(digits.length / 2) + 1;
    }
    case 'B':
      return v instanceof Uint8Array ? v.byteLength : Buffer.byteLength(String(v), 'base64');
    case 'SS':
      return (v as string[]).reduce((n, s) => n + Buffer.byteLength(s, 'utf8'), 0);
    case 'NS':
      return (v as string[]).reduce((n, s) => n + valueSize({ N: s }), 0);
    case 'M':
      return 3 + itemSizeBytes(v as Record<string, AttributeValue>) + Object.keys(v as object).length;
    case 'L':
      return 3 + (v as AttributeValue[]).reduce((n, e) => n + valueSize(e) + 1, 0);
    default:
      return 1; // BOOL, NULL
  }
}

/** Size of an item in DynamoDB's typed form (`{ id: { S: 'a' } }`), by DynamoDB's item-size rules. */
export function itemSizeBytes(item: Readonly<Record<string, AttributeValue>>): number {
  let n = 0;
  for (const [name, value] of Object.entries(item)) n += Buffer.byteLength(name, 'utf8') + valueSize(value);
  return n;
}

/** Write units of one item write: 1 per started KB, at least 1. */
export function writeUnits(sizeBytes: number): number {
  return Math.max(1, Math.ceil(sizeBytes / 1024));
}

/**
 * WRU of a refused write (which DynamoDB bills, and reports no capacity for): 1 per started KB of the
 * item as it was (ALL_OLD, when the error carries it), at least 1; twice that per item of a cancelled
 * transaction. Other errors (throttling, a lost connection) bill nothing.
 */
export function refusedWriteUnits(command: string, input: Record<string, unknown>, error: unknown): number {
  const e = error as {
    name?: string;
    Item?: Record<string, AttributeValue>;
    CancellationReasons?: unknown[];
  };
  if (command === 'TransactWriteItems' && e.name === 'TransactionCanceledException') {
    const items = (input.TransactItems as unknown[] | undefined) ?? [];
    const reasons = (e.CancellationReasons ?? []) as { Item?: Record<string, AttributeValue> }[];
    return items.reduce<number>((n, _, i) => n + 2 * writeUnits(itemSizeBytes(reasons[i]?.Item ?? {})), 0);
  }
  if (WRITES.has(command) && e.name === 'ConditionalCheckFailedException') {
    return writeUnits(itemSizeBytes(e.Item ?? {}));
  }
  return 0;
}

/**
 * RRU of a BatchGetItem by DynamoDB's rules for items under 4 KB: 0.5 per key asked for, 1 when
 * consistent (a key with no item is billed the same minimum). Unprocessed keys are asked again and counted then.
 */
export function batchGetUnits(input: Record<string, unknown>): number {
  const tables = (input.RequestItems ?? {}) as Record<string, { Keys?: unknown[]; ConsistentRead?: boolean }>;
  return Object.values(tables).reduce(
    (n, t) => n + (t.Keys?.length ?? 0) * (t.ConsistentRead === true ? 1 : 0.5),
    0,
  );
}

interface Consumed {
  readonly CapacityUnits?: number;
  readonly ReadCapacityUnits?: number;
  readonly WriteCapacityUnits?: number;
}

/**
 * Asks DynamoDB for the capacity of every request of a worker's clients (`ReturnConsumedCapacity:
 * TOTAL`, added by SDK middleware) and adds it up; refused conditional writes, which report none, are
 * computed by {@link refusedWriteUnits}.
 */
export class CapacityMeter {
  #reportedWru = 0;
  #reportedRru = 0;
  #computedWru = 0;
  #computedRru = 0;
  #reportedRequests = 0;
  #computedRequests = 0;
  readonly #byCommand = new Map<string, { wru: number; rru: number }>();

  /** Adds the middleware to the DynamoDB client of `clients` (the document client shares its stack). */
  attach(clients: AwsClients): this {
    const middleware =
      <I extends object, O extends object>(): InitializeMiddleware<I, O> =>
      (next, context) =>
      async (args) => {
        const command = String(context.commandName ?? '').replace(/Command$/, '');
        const measured = WRITES.has(command) || READS.has(command);
        const input = { ...(args.input as Record<string, unknown>) };
        if (measured) input.ReturnConsumedCapacity ??= 'TOTAL';
        try {
          const out = await next({ ...args, input: input as typeof args.input });
          const consumed = (out.output as { ConsumedCapacity?: Consumed | Consumed[] }).ConsumedCapacity;
          if (measured && consumed === undefined && command === 'BatchGetItem') {
            const units = batchGetUnits(input);
            this.#computedRru += units;
            this.#computedRequests += 1;
            this.#add(command, 0, units);
          } else if (measured) this.#reported(command, consumed);
          return out;
        } catch (error) {
          const units = refusedWriteUnits(command, input, error);
          if (units > 0) {
            this.#computedWru += units;
            this.#computedRequests += 1;
            this.#add(command, units, 0);
          }
          throw error;
        }
      };
    addInitializeMiddleware(clients.ddb.middlewareStack, middleware, {
      name: 'benchCapacityMeter',
    });
    return this;
  }

  #reported(command: string, consumed: Consumed | Consumed[] | undefined): void {
    if (consumed === undefined) return;
    const list = Array.isArray(consumed) ? consumed : [consumed];
    const total = list.reduce((n, c) => n + (c.CapacityUnits ?? 0), 0);
    const write = WRITES.has(command);
    this.#reportedRequests += 1;
    if (write) this.#reportedWru += total;
    else this.#reportedRru += total;
    this.#add(command, write ? total : 0, write ? 0 : total);
  }

  #add(command: string, wru: number, rru: number): void {
    const row = this.#byCommand.get(command) ?? { wru: 0, rru: 0 };
    row.wru += wru;
    row.rru += rru;
    this.#byCommand.set(command, row);
  }

  /** Totals so far. */
  snapshot(): CapacityTotals {
    return {
      wru: this.#reportedWru + this.#computedWru,
      rru: this.#reportedRru + this.#computedRru,
      reportedWru: this.#reportedWru,
      reportedRru: this.#reportedRru,
      computedWru: this.#computedWru,
      computedRru: this.#computedRru,
      reportedRequests: this.#reportedRequests,
      computedRequests: this.#computedRequests,
      byCommand: Object.fromEntries([...this.#byCommand].map(([k, v]) => [k, { ...v }])),
    };
  }
}

/** Adds an initialize-step middleware built for the stack's own input and output types. */
export function addInitializeMiddleware<I extends object, O extends object>(
  stack: MiddlewareStack<I, O>,
  build: <I2 extends object, O2 extends object>() => InitializeMiddleware<I2, O2>,
  options: { name: string; priority?: 'high' | 'normal' | 'low' },
): void {
  stack.add(build<I, O>(), { step: 'initialize', override: true, ...options });
}
