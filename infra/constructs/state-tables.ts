import type { RemovalPolicy } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { Construct } from 'constructs';
import {
  PROBLEM_AT_ATTRIBUTE,
  PROBLEM_SHARD_ATTRIBUTE,
  PROBLEMS_INDEX,
  PROBLEMS_PROJECTION,
} from '../../shared/core/contract/job-history.ts';
import { type KeyAttribute, keyName, keyType } from '../../shared/core/model/table.ts';
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
 * leaseq's own DynamoDB state: the `jobs` table (dedup + job lease + checkpoint) with its sparse `problems`
 * index, and the `leases` table (named locks), both with a TTL attribute that only tidies old items.
 */
export class StateTables extends Construct {
  readonly jobs: dynamodb.Table;
  readonly leases: dynamodb.Table;

  constructor(scope: Construct, id: string, props: StateTablesProps) {
    super(scope, id);
    const { names } = props;
    const common = {
      removalPolicy: props.removalPolicy,
      deletionProtection: props.deletionProtection ?? false,
    };
    this.jobs = leaseqTable(this, 'JobsTable', { ...common, ...names.jobs });
    addProblemsIndex(this.jobs);
    this.leases = leaseqTable(this, 'LeasesTable', { ...common, ...names.leases });
  }
}

/** Shape and policies of one table made by {@link leaseqTable}. */
export interface LeaseqTableProps {
  readonly name: string;
  readonly partitionKey: KeyAttribute;
  readonly sortKey?: KeyAttribute;
  readonly ttlAttribute?: string;
  readonly removalPolicy: RemovalPolicy;
  readonly deletionProtection: boolean;
}

const ATTRIBUTE_TYPE = {
  S: dynamodb.AttributeType.STRING,
  N: dynamodb.AttributeType.NUMBER,
  B: dynamodb.AttributeType.BINARY,
} as const;

/**
 * A table with leaseq's defaults: on demand (no capacity to plan for bursty queues), point-in-time
 * recovery, encryption at rest with the AWS-managed key, optional TTL.
 *
 * `dynamodb.Table` (AWS::DynamoDB::Table) rather than TableV2 (AWS::DynamoDB::GlobalTable) on purpose:
 * the local emulators and the template-driven local provisioning understand the former.
 */
export function leaseqTable(scope: Construct, id: string, props: LeaseqTableProps): dynamodb.Table {
  const key = (k: KeyAttribute) => ({ name: keyName(k), type: ATTRIBUTE_TYPE[keyType(k)] });
  return new dynamodb.Table(scope, id, {
    tableName: props.name,
    partitionKey: key(props.partitionKey),
    ...(props.sortKey ? { sortKey: key(props.sortKey) } : {}),
    billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
    pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
    encryption: dynamodb.TableEncryption.AWS_MANAGED,
    removalPolicy: props.removalPolicy,
    deletionProtection: props.deletionProtection,
    ...(props.ttlAttribute ? { timeToLiveAttribute: props.ttlAttribute } : {}),
  });
}

/**
 * The sparse `problems` index (job-history.ts) on a `jobs` table: only items with a problem carry its keys,
 * so a first-time success writes nothing to it. Added to a deployed table, CloudFormation updates the table
 * in place (no replacement): DynamoDB backfills the index while the table keeps serving.
 */
export function addProblemsIndex(table: dynamodb.Table): void {
  table.addGlobalSecondaryIndex({
    indexName: PROBLEMS_INDEX,
    partitionKey: { name: PROBLEM_SHARD_ATTRIBUTE, type: dynamodb.AttributeType.STRING },
    sortKey: { name: PROBLEM_AT_ATTRIBUTE, type: dynamodb.AttributeType.NUMBER },
    projectionType: dynamodb.ProjectionType.INCLUDE,
    nonKeyAttributes: [...PROBLEMS_PROJECTION],
  });
}
