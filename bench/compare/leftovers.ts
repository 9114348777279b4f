import { DeleteTableCommand, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { DeleteQueueCommand, ListQueuesCommand } from '@aws-sdk/client-sqs';
import type { AwsClients } from '../../shared/aws/clients.ts';

/** Queues and tables whose names start with the session's prefix. */
export interface Leftovers {
  readonly queues: readonly string[];
  readonly tables: readonly string[];
}

/** Lists what this benchmark session still has on the endpoint (nothing, after a clean run). */
export async function findLeftovers(clients: AwsClients, prefix: string): Promise<Leftovers> {
  const queues = (await clients.sqs.send(new ListQueuesCommand({ QueueNamePrefix: prefix }))).QueueUrls ?? [];
  const tables: string[] = [];
  let start: string | undefined;
  do {
    const page = await clients.ddb.send(
      new ListTablesCommand(start ? { ExclusiveStartTableName: start } : {}),
    );
    tables.push(...(page.TableNames ?? []).filter((t) => t.startsWith(prefix)));
    start = page.LastEvaluatedTableName;
  } while (start);
  return { queues, tables };
}

/** Deletes what {@link findLeftovers} found; returns what is still there afterwards. */
export async function removeLeftovers(clients: AwsClients, prefix: string): Promise<Leftovers> {
  const found = await findLeftovers(clients, prefix);
  for (const url of found.queues)
    await clients.sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
  for (const table of found.tables) {
    await clients.ddb.send(new DeleteTableCommand({ TableName: table })).catch(() => undefined);
  }
  return found.queues.length + found.tables.length > 0 ? findLeftovers(clients, prefix) : found;
}
