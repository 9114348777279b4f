import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { EffectTable } from '../core/model/effect-table.ts';
import type { AnyJobDefinition, TableHandleSource } from '../core/model/job-definition.ts';
import type { JobRegistry } from '../core/model/registry.ts';
import { type TableDefinition, tableEnvVar } from '../core/model/table.ts';
import { ConfigError } from '../errors.ts';

/**
 * Where the application tables of a deployment are: physical names by logical table name, turned into
 * the `ctx.tables` handles each job type declared. Built once per worker.
 */
export class EffectTables implements TableHandleSource {
  readonly #doc: DynamoDBDocumentClient;
  readonly #names: Readonly<Record<string, string>>;
  readonly #byJob = new WeakMap<AnyJobDefinition, Readonly<Record<string, EffectTable>>>();

  constructor(doc: DynamoDBDocumentClient, names: Readonly<Record<string, string>>) {
    this.#doc = doc;
    this.#names = names;
  }

  /**
   * Physical names of `registry`'s tables from the environment (`LEASEQ_TABLE_<NAME>`, which the CDK
   * construct and local workers set). Only tables some registered job declares are read.
   * @throws ConfigError naming every missing variable.
   */
  static namesFromEnv(registry: JobRegistry, env: NodeJS.ProcessEnv): Record<string, string> {
    const names: Record<string, string> = {};
    const missing: string[] = [];
    for (const table of registry.tables()) {
      const value = env[tableEnvVar(table.name)]?.trim();
      if (value) names[table.name] = value;
      else missing.push(tableEnvVar(table.name));
    }
    if (missing.length > 0) {
      throw new ConfigError(
        `invalid worker configuration: ${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} required (the physical name of a table the jobs declare)`,
      );
    }
    return names;
  }

  /** The handles of the tables `job` declared, keyed as the job declared them. */
  for(job: AnyJobDefinition): Readonly<Record<string, EffectTable>> {
    let handles = this.#byJob.get(job);
    if (!handles) {
      const built: Record<string, EffectTable> = {};
      const declared: Readonly<Record<string, TableDefinition>> = job.tables ?? {};
      for (const [key, table] of Object.entries(declared)) {
        const name = this.#names[table.name];
        if (!name) {
          throw new ConfigError(
            `job type ${job.type} writes table ${table.name}, which has no physical name (${tableEnvVar(table.name)})`,
          );
        }
        built[key] = new EffectTable(this.#doc, table, name);
      }
      handles = Object.freeze(built);
      this.#byJob.set(job, handles);
    }
    return handles;
  }
}
