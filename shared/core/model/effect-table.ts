import { type DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import type { Effect } from '../contract/job-store.ts';
import { versionedPut } from '../decisions/optimistic.ts';
import { keyName, type TableDefinition } from './table.ts';

/** DynamoDB item key or item, in document form. */
export type Item = Record<string, unknown>;

/** A conditional write's expression, with its placeholders. */
export interface Condition {
  readonly expression: string;
  readonly names?: Readonly<Record<string, string>>;
  readonly values?: Readonly<Record<string, unknown>>;
}

/**
 * A job's handle on one application table (`ctx.tables.<name>`): strongly consistent reads, and builders
 * of effects. An effect is only a description of a write: it is applied inside the job's fenced
 * transaction (with the checkpoint of `ctx.step`, or with the completion), so it happens once or not at all.
 */
export class EffectTable {
  /** Physical table name. */
  readonly name: string;
  readonly definition: TableDefinition;
  readonly #doc: DynamoDBDocumentClient;

  constructor(doc: DynamoDBDocumentClient, definition: TableDefinition, physicalName: string) {
    this.#doc = doc;
    this.definition = definition;
    this.name = physicalName;
  }

  /** Reads one item (strongly consistent, so a retry sees what an earlier attempt committed). */
  async get<T extends object = Item>(key: Item): Promise<T | undefined> {
    const out = await this.#doc.send(
      new GetCommand({ TableName: this.name, Key: key, ConsistentRead: true }),
    );
    return out.Item as T | undefined;
  }

  /**
   * Put of application state under optimistic locking: applies only if the item's version is still
   * `seenVersion` (`undefined`: the item must not exist yet); writes version + 1. A refusal re-runs the
   * step or the job a few times in process, then the job goes back to the queue with a delay.
   */
  versionedPut(input: {
    readonly key: Item;
    readonly seenVersion: number | undefined;
    readonly item: Item;
    /** @default 'version' */
    readonly versionAttribute?: string;
  }): Effect {
    return versionedPut({
      tableName: this.name,
      key: input.key,
      seenVersion: input.seenVersion,
      item: input.item,
      partitionKey: keyName(this.definition.partitionKey),
      ...(input.versionAttribute ? { versionAttribute: input.versionAttribute } : {}),
    });
  }

  /** A Put (optionally conditional: a failed condition counts as an optimistic conflict). */
  put(item: Item, condition?: Condition): Effect {
    return { Put: { TableName: this.name, Item: item, ...conditionParts(condition) } };
  }

  /** An UpdateItem with your own update expression. */
  update(key: Item, update: Condition, condition?: string): Effect {
    const names = update.names ? { ExpressionAttributeNames: { ...update.names } } : {};
    const values = update.values ? { ExpressionAttributeValues: { ...update.values } } : {};
    return {
      Update: {
        TableName: this.name,
        Key: key,
        UpdateExpression: update.expression,
        ...names,
        ...values,
        ...(condition ? { ConditionExpression: condition } : {}),
      },
    };
  }

  /** A Delete (optionally conditional). */
  delete(key: Item, condition?: Condition): Effect {
    return { Delete: { TableName: this.name, Key: key, ...conditionParts(condition) } };
  }
}

function conditionParts(condition: Condition | undefined) {
  if (!condition) return {};
  return {
    ConditionExpression: condition.expression,
    ...(condition.names ? { ExpressionAttributeNames: { ...condition.names } } : {}),
    ...(condition.values ? { ExpressionAttributeValues: { ...condition.values } } : {}),
  };
}
