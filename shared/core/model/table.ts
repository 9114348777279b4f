import { ConfigError } from '../../errors.ts';

/** A key attribute: its name (a string key), or its name and type. */
export type KeyAttribute = string | { readonly name: string; readonly type: 'string' | 'number' | 'binary' };

/** The shape of an application table a job's effects write. */
export interface TableSpec {
  readonly partitionKey: KeyAttribute;
  /** @default none */
  readonly sortKey?: KeyAttribute;
  /** TTL attribute (epoch seconds) the table should expire items by. @default none */
  readonly ttlAttribute?: string;
}

/**
 * An application table, declared once by the job module and referenced by the jobs that write it.
 * `name` is logical (`ledger`, `emailLog`): the physical name, the worker's environment variable and
 * the stack output are derived from it (see {@link tableEnvVar}, {@link tableOutputKey}).
 */
export interface TableDefinition extends TableSpec {
  readonly name: string;
}

const LOGICAL_NAME = /^[a-z][a-zA-Z0-9]{0,39}$/;
// leaseq's own tables are `<prefix>-jobs` and `<prefix>-leases`, with outputs JobsTableName/LeasesTableName.
const RESERVED = new Set(['jobs', 'leases']);

/**
 * Declares an application table. `name` is camelCase (1-40 letters and digits, starting lower-case).
 * @throws ConfigError for a name outside that pattern or a spec without a partition key.
 */
export function defineTable(name: string, spec: TableSpec): TableDefinition {
  return Object.freeze(assertTableDefinition({ ...spec, name }));
}

/**
 * The checks of {@link defineTable}, for a table that reached a job some other way (a hand-written
 * object): name pattern, reserved names, a partition key.
 * @throws ConfigError
 */
export function assertTableDefinition(table: TableDefinition): TableDefinition {
  if (typeof table !== 'object' || table === null) {
    throw new ConfigError(
      `a table must come from defineTable(name, { partitionKey }), received ${String(table)}`,
    );
  }
  const { name } = table;
  const spec = table;
  if (typeof name !== 'string' || !LOGICAL_NAME.test(name)) {
    throw new ConfigError(
      `table name ${JSON.stringify(name)} is not valid; expected camelCase: a lower-case letter, then up to 39 letters or digits (e.g. "ledger", "emailLog")`,
    );
  }
  if (RESERVED.has(name)) {
    throw new ConfigError(
      `table name ${JSON.stringify(name)} is leaseq's own (its physical name and stack output would collide); choose another, e.g. "${name}Log"`,
    );
  }
  if (!keyName(spec.partitionKey)) {
    throw new ConfigError(`table ${name} has no partitionKey; expected e.g. { partitionKey: 'id' }`);
  }
  return table;
}

/** The attribute name of a key attribute. */
export function keyName(key: KeyAttribute): string {
  return typeof key === 'string' ? key : key.name;
}

/** The DynamoDB type letter of a key attribute. */
export function keyType(key: KeyAttribute): 'S' | 'N' | 'B' {
  if (typeof key === 'string') return 'S';
  return key.type === 'number' ? 'N' : key.type === 'binary' ? 'B' : 'S';
}

const words = (name: string): string[] => name.split(/(?=[A-Z])/).map((w) => w.toLowerCase());

/** Environment variable that carries a table's physical name to the worker: `emailLog` -> `LEASEQ_TABLE_EMAIL_LOG`. */
export function tableEnvVar(name: string): string {
  return `LEASEQ_TABLE_${words(name).join('_').toUpperCase()}`;
}

/** Stack output key of a table's physical name: `emailLog` -> `EmailLogTableName`. */
export function tableOutputKey(name: string): string {
  return `${words(name)
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join('')}TableName`;
}

/** Physical table name of an application table: `<prefix>-email-log`. */
export function tablePhysicalName(prefix: string, name: string): string {
  return `${prefix}-${words(name).join('-')}`;
}

/** Two declarations of one table name must agree on its shape. */
export function sameTableSpec(a: TableSpec, b: TableSpec): boolean {
  const key = (k: KeyAttribute | undefined) => (k === undefined ? '' : `${keyName(k)}:${keyType(k)}`);
  return (
    key(a.partitionKey) === key(b.partitionKey) &&
    key(a.sortKey) === key(b.sortKey) &&
    (a.ttlAttribute ?? '') === (b.ttlAttribute ?? '')
  );
}

/** The application tables a job writes, by the name `ctx.tables` gives them. */
export type TableMap = Readonly<Record<string, TableDefinition>>;
