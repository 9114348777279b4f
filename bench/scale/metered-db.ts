/**
 * The measured pass's in-memory DynamoDB with books: every request's units, as the client tallies them,
 * put down to the item it touched, by the item's role (its table and key prefix).
 */
import {
  BatchGetCommand,
  DeleteCommand,
  GetCommand,
  PutCommand,
  TransactWriteCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { PROBLEM_SHARD_ATTRIBUTE, PROBLEMS_PROJECTION } from '../../shared/core/contract/job-history.ts';
import { readUnits, writeUnits } from '../../shared/testing/in-memory-dynamodb/capacity.ts';
import {
  InMemoryDynamoDb,
  type InMemoryDynamoDbOptions,
  type LandedWrite,
} from '../../shared/testing/in-memory-dynamodb/client.ts';
import { leaseqTables } from '../../shared/testing/in-memory-dynamodb/tables.ts';
import { storedBytes } from '../../shared/testing/in-memory-dynamodb/values.ts';
import type { ItemRole, KindFigures, RoleFigures } from './measure.ts';

export const JOBS = 'scale-jobs';
export const LEASES = 'scale-leases';
export const LEDGER = 'ledger';

/** Per request, which role each touched item has (by table and key). */
function roleOf(table: string, key: string): ItemRole {
  if (table === JOBS) return 'job';
  if (table === LEASES) {
    if (key.startsWith('rate:')) return 'rate';
    if (key.startsWith('slot:')) return 'slot';
    return 'named';
  }
  return 'app';
}

type Units = { requests: number; wru: number; rru: number };

/** Units by role and item, summed over a kind's jobs. */
export class Books {
  readonly byItem = new Map<string, Units & { role: ItemRole }>();

  add(role: ItemRole, item: string, units: Partial<Units>): void {
    const id = `${role}\u0000${item}`;
    const row = this.byItem.get(id) ?? { role, requests: 0, wru: 0, rru: 0 };
    row.requests += units.requests ?? 0;
    row.wru += units.wru ?? 0;
    row.rru += units.rru ?? 0;
    this.byItem.set(id, row);
  }

  roles(jobs: number): Partial<Record<ItemRole, RoleFigures>> {
    const out: Partial<Record<ItemRole, RoleFigures>> = {};
    const roles = new Set([...this.byItem.values()].map((r) => r.role));
    for (const role of roles) {
      const rows = [...this.byItem.values()].filter((r) => r.role === role);
      const sum = (f: (u: Units) => number) => rows.reduce((n, r) => n + f(r), 0);
      const total = sum((r) => r.wru + r.rru);
      const busiest = Math.max(...rows.map((r) => r.wru + r.rru));
      out[role] = {
        requests: sum((r) => r.requests) / jobs,
        wru: sum((r) => r.wru) / jobs,
        rru: sum((r) => r.rru) / jobs,
        busiestShare: total === 0 ? 0 : busiest / total,
        items: rows.length,
      };
    }
    return out;
  }
}

/** The key of a single-item request's item, as text. */
function keyText(key: unknown): string {
  return Object.values((key ?? {}) as Record<string, unknown>)
    .map(String)
    .join('#');
}

/** Whether an item is in the `problems` index (it carries the index's partition key). */
const inIndex = (item: Record<string, unknown> | undefined) =>
  item !== undefined && typeof item[PROBLEM_SHARD_ATTRIBUTE] === 'string';

/** Index writes one landed item write costs (a projected item is far below 1 KB: 1 WRU each). */
function indexWrites(old: Record<string, unknown> | undefined, next: Record<string, unknown> | undefined) {
  const before = inIndex(old);
  const after = inIndex(next);
  if (!before && !after) return [];
  if (before && !after) return [String(old?.[PROBLEM_SHARD_ATTRIBUTE])];
  if (!before && after) return [String(next?.[PROBLEM_SHARD_ATTRIBUTE])];
  const keyMoved = ['problemShard', 'problemAt'].some((k) => old?.[k] !== next?.[k]);
  if (keyMoved) return [String(old?.[PROBLEM_SHARD_ATTRIBUTE]), String(next?.[PROBLEM_SHARD_ATTRIBUTE])];
  const changed = PROBLEMS_PROJECTION.some((k) => JSON.stringify(old?.[k]) !== JSON.stringify(next?.[k]));
  return changed ? [String(next?.[PROBLEM_SHARD_ATTRIBUTE])] : [];
}

/**
 * The in-memory DynamoDB with books: each request's units (the client's tally, read just before and just
 * after: with no faults a request is applied within send()) go to the items it touched; a transaction's
 * to each of its items by that item's own size, as the client bills them.
 */
export class MeteredDb extends InMemoryDynamoDb {
  books = new Books();
  /** DynamoDB requests sent (a transaction is one). */
  sent = 0;
  #landed: LandedWrite | undefined;

  /** `extra`: the load run's latency and per-partition limit. */
  constructor(now: () => number, extra: Pick<InMemoryDynamoDbOptions, 'latencyMs' | 'partitionLimits'> = {}) {
    super({
      ...extra,
      tables: leaseqTables({ jobs: JOBS, leases: LEASES, app: {} }).concat([
        { name: LEDGER, partitionKey: { name: 'account', type: 'S' } },
      ]),
      now,
      onWrite: (write) => {
        if (this) this.#landed = write;
      },
    });
  }

  // biome-ignore lint/suspicious/noExplicitAny: the document client's overloads of send
  override send(command: any, options?: any): Promise<any> {
    const before = this.tally();
    this.#landed = undefined;
    this.sent += 1;
    const answer = super.send(command, options);
    const after = this.tally();
    const input = (command?.input ?? {}) as Record<string, unknown>;
    const diff = (table: string) => {
      const a = after[table];
      const b = before[table];
      return {
        wru: (a?.writeUnits ?? 0) - (b?.writeUnits ?? 0),
        rru: (a?.readUnits ?? 0) - (b?.readUnits ?? 0),
      };
    };
    for (const w of (this.#landed as LandedWrite | undefined)?.writes ?? []) {
      for (const shard of indexWrites(w.old, w.next)) this.books.add('problems', shard, { wru: 1 });
    }
    if (command instanceof TransactWriteCommand) this.#transaction(input, diff);
    else if (command instanceof BatchGetCommand) {
      for (const [table, request] of Object.entries(
        (input.RequestItems ?? {}) as Record<string, { Keys?: unknown[] }>,
      )) {
        const keys = request.Keys ?? [];
        const d = diff(table);
        for (const key of keys) {
          this.books.add(roleOf(table, keyText(key)), keyText(key), {
            requests: 1 / keys.length,
            rru: d.rru / keys.length,
          });
        }
      }
    } else if (
      command instanceof GetCommand ||
      command instanceof PutCommand ||
      command instanceof UpdateCommand ||
      command instanceof DeleteCommand
    ) {
      const table = String(input.TableName);
      const key = keyText(input.Key ?? pickKey(table, input.Item as Record<string, unknown>));
      this.books.add(roleOf(table, key), key, { requests: 1, ...diff(table) });
    } else {
      const table = String(input.TableName);
      this.books.add(roleOf(table, 'query'), `query:${String(input.IndexName ?? '')}`, {
        requests: 1,
        ...diff(table),
      });
    }
    return answer;
  }

  #transaction(input: Record<string, unknown>, diff: (t: string) => { wru: number; rru: number }): void {
    const landed = (this.#landed as LandedWrite | undefined)?.writes;
    const counted = new Set<ItemRole>();
    const once = (role: ItemRole) => {
      if (counted.has(role)) return 0;
      counted.add(role);
      return 1;
    };
    if (landed) {
      for (const w of landed) {
        const bytes = Math.max(w.old ? storedBytes(w.old) : 0, w.next ? storedBytes(w.next) : 0);
        const units = w.kind === 'check' ? readUnits(bytes, true, true) : writeUnits(bytes, true);
        const table = w.table.schema.name;
        const key = keyText(w.table.keyAttributes((w.next ?? w.old ?? {}) as never));
        const role = roleOf(table, key);
        this.books.add(role, key, { requests: once(role), wru: units });
      }
      return;
    }
    // Refused: the client bills each table touched; split among that table's items.
    const actions = (input.TransactItems ?? []) as Record<
      string,
      { TableName?: string; Key?: unknown; Item?: unknown }
    >[];
    const items = actions.map((a) => Object.values(a)[0]).filter((a) => a !== undefined);
    for (const table of new Set(items.map((a) => String(a.TableName)))) {
      const mine = items.filter((a) => a.TableName === table);
      const d = diff(table);
      for (const a of mine) {
        const key = keyText(a.Key ?? pickKey(table, a.Item as Record<string, unknown>));
        const role = roleOf(table, key);
        this.books.add(role, key, { requests: once(role), wru: d.wru / mine.length });
      }
    }
  }
}

/** The client's tally per job, by the table's logical name. */
export function tallyOf(db: InMemoryDynamoDb, jobs: number): KindFigures['tally'] {
  const names: Record<string, string> = { [JOBS]: 'jobs', [LEASES]: 'leases', [LEDGER]: 'ledger' };
  const out: Record<string, { requests: number; wru: number; rru: number }> = {};
  for (const [table, t] of Object.entries(db.tally())) {
    out[names[table] ?? table] = {
      requests: t.requests / jobs,
      wru: t.writeUnits / jobs,
      rru: t.readUnits / jobs,
    };
  }
  return out;
}

function pickKey(table: string, item: Record<string, unknown> | undefined): Record<string, unknown> {
  const name = table === JOBS ? 'dedupKey' : table === LEASES ? 'leaseKey' : 'account';
  return { [name]: item?.[name] };
}
