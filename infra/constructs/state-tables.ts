import type { RemovalPolicy } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { Construct } from 'constructs';
import type { ResourceNames } from '../../shared/resources.ts';

/** Properties of {@link StateTables}. */
export interface StateTablesProps {
  /** Table names and key attributes, from `resourceNames(prefix)`. */
  readonly names: ResourceNames['tables'];
  /** Removal policy of the tables (RETAIN in production: they hold the only record of what ran). */
  readonly removalPolicy: RemovalPolicy;
  /**
   * Refuse `DeleteTable` even from CloudFormation.
   * @default false
   */
  readonly deletionProtection?: boolean;
}

/**
 * leaseq's DynamoDB state: the `jobs` table (dedup + job lease + checkpoint), the `leases` table
 * (named locks) and the example application's `ledger` table.
 *
 * All tables: on demand (no capacity to plan for bursty queues), point-in-time recovery, encryption at
 * rest with the AWS-managed key. `jobs` and `leases` have a TTL attribute that only tidies old items.
 *
 * `dynamodb.Table` (AWS::DynamoDB::Table) rather than TableV2 (AWS::DynamoDB::GlobalTable) on purpose:
 * the local emulators and the template-driven local provisioning understand the former.
 */
export class StateTables extends Construct {
  readonly jobs: dynamodb.Table;
  readonly leases: dynamodb.Table;
  readonly ledger: dynamodb.Table;

  constructor(scope: Construct, id: string, props: StateTablesProps) {
    super(scope, id);
    const { names } = props;
    this.jobs = this.table(
      'JobsTable',
      props,
      names.jobs.name,
      names.jobs.partitionKey,
      names.jobs.ttlAttribute,
    );
    this.leases = this.table(
      'LeasesTable',
      props,
      names.leases.name,
      names.leases.partitionKey,
      names.leases.ttlAttribute,
    );
    this.ledger = this.table('LedgerTable', props, names.ledger.name, names.ledger.partitionKey);
  }

  private table(
    id: string,
    props: StateTablesProps,
    tableName: string,
    partitionKey: string,
    ttlAttribute?: string,
  ): dynamodb.Table {
    return new dynamodb.Table(this, id, {
      tableName,
      partitionKey: { name: partitionKey, type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      encryption: dynamodb.TableEncryption.AWS_MANAGED,
      removalPolicy: props.removalPolicy,
      deletionProtection: props.deletionProtection ?? false,
      ...(ttlAttribute ? { timeToLiveAttribute: ttlAttribute } : {}),
    });
  }
}
