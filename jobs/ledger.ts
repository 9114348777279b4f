import { type DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import type { Effect } from '../shared/core/job-store.ts';
import { versionedPut } from '../shared/core/optimistic.ts';

/** One account of the example `ledger` table. */
export interface Account {
  readonly account: string;
  readonly balance: number;
  readonly version: number;
}

/**
 * The example application state: accounts with a balance and a version. Every change is an effect
 * (a versioned Put) that commits inside the job's fenced transaction, so it happens once or not at all.
 */
export class Ledger {
  readonly #doc: DynamoDBDocumentClient;
  readonly tableName: string;

  constructor(doc: DynamoDBDocumentClient, tableName: string) {
    this.#doc = doc;
    this.tableName = tableName;
  }

  /** Reads an account (strongly consistent); a missing account has balance 0 and no version. */
  async read(account: string): Promise<{ balance: number; version: number | undefined }> {
    const out = await this.#doc.send(
      new GetCommand({ TableName: this.tableName, Key: { account }, ConsistentRead: true }),
    );
    const item = out.Item as Account | undefined;
    return { balance: item?.balance ?? 0, version: item?.version };
  }

  /** An effect that adds `delta` to an account read at `seen` (refused if someone wrote it since). */
  async change(account: string, delta: number): Promise<Effect> {
    const seen = await this.read(account);
    return versionedPut({
      tableName: this.tableName,
      key: { account },
      seenVersion: seen.version,
      item: { balance: seen.balance + delta },
    });
  }
}
