// What each request of the in-memory DynamoDB costs, as on-demand DynamoDB bills it: writes in 1 KB
// units (transactional ones twice), reads in 4 KB units (eventually consistent ones half); and a running
// tally per table that tests and the benchmark read.

/** Write units of one item of `bytes` (the larger of its old and new size). */
export function writeUnits(bytes: number, transactional: boolean): number {
  const units = Math.max(1, Math.ceil(bytes / 1024));
  return transactional ? 2 * units : units;
}

/** Read units of `bytes` read at once (an item, or a query's page). */
export function readUnits(bytes: number, consistent: boolean, transactional = false): number {
  const units = Math.max(1, Math.ceil(bytes / 4096));
  if (transactional) return 2 * units;
  return consistent ? units : units / 2;
}

/** What one table served so far. */
export interface TableTally {
  /** Requests that reached the table (a transaction counts once per table it touches). */
  requests: number;
  readUnits: number;
  writeUnits: number;
  /** Requests by command name (`UpdateCommand`, ...). */
  readonly commands: Record<string, number>;
}

/** The running tally of a client, by table name. */
export class Tally {
  readonly #tables = new Map<string, TableTally>();

  add(table: string, command: string, units: { readonly read?: number; readonly write?: number }): void {
    let t = this.#tables.get(table);
    if (t === undefined) {
      t = { requests: 0, readUnits: 0, writeUnits: 0, commands: {} };
      this.#tables.set(table, t);
    }
    t.requests += 1;
    t.readUnits += units.read ?? 0;
    t.writeUnits += units.write ?? 0;
    t.commands[command] = (t.commands[command] ?? 0) + 1;
  }

  /** A copy of the tally by table name. */
  snapshot(): Record<string, TableTally> {
    const out: Record<string, TableTally> = {};
    for (const [name, t] of this.#tables) out[name] = { ...t, commands: { ...t.commands } };
    return out;
  }

  reset(): void {
    this.#tables.clear();
  }
}

/** The `ConsumedCapacity` entry of one table, as DynamoDB answers it for TOTAL or INDEXES. */
export function consumed(
  table: string,
  units: { readonly read?: number; readonly write?: number },
  mode: string | undefined,
  index?: string,
): Record<string, unknown> {
  const total = (units.read ?? 0) + (units.write ?? 0);
  const split = {
    ...(units.read ? { ReadCapacityUnits: units.read } : {}),
    ...(units.write ? { WriteCapacityUnits: units.write } : {}),
  };
  const out: Record<string, unknown> = { TableName: table, CapacityUnits: total, ...split };
  if (mode === 'INDEXES') {
    if (index) out.GlobalSecondaryIndexes = { [index]: { CapacityUnits: total, ...split } };
    else out.Table = { CapacityUnits: total, ...split };
  }
  return out;
}
