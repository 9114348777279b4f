import { type Duration, type RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { WORKER_ENV } from '../../shared/resources.ts';

// The claim-check bucket of LeaseqPipeline's `largePayloads` and its grants, made in the pipeline's own
// scope (same construct ids, so the logical ids of existing stacks do not change).

/** The bucket: SSE-S3, public access blocked, TLS only, objects expiring after `expiration`. */
export function payloadBucket(
  scope: Construct,
  options: { readonly expiration: Duration; readonly removalPolicy: RemovalPolicy },
): s3.Bucket {
  const bucket = new s3.Bucket(scope, 'PayloadBucket', {
    encryption: s3.BucketEncryption.S3_MANAGED,
    blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
    enforceSSL: true,
    removalPolicy: options.removalPolicy,
    lifecycleRules: [{ expiration: options.expiration }],
  });
  Validations.of(bucket).acknowledge({
    id: 'AwsSolutions-S1',
    reason:
      'Objects are job payloads written once by the producer and read by the worker, expiring after the ' +
      'lifecycle period; access is audited with CloudTrail data events where needed, not server access logs.',
  });
  return bucket;
}

/**
 * The worker's reads: GetObject on the objects under the prefix, no writes, no deletes (the lifecycle rule
 * expires objects), and the bucket and prefix in its environment. ListBucket under the producer's prefix is
 * there for one answer: without it S3 answers GetObject of a missing key 403 AccessDenied (it does not tell
 * a role that may not list whether a key exists), so an expired payload would look like a missing
 * permission, be retried, and reach the DLQ with no reason. With it, S3 answers 404 NoSuchKey and the job
 * is dead-lettered `invalid-payload-missing` at once.
 */
export function grantPayloadReads(
  scope: Construct,
  bucket: s3.Bucket,
  prefix: string,
  worker: lambda.Function,
): void {
  const reads = new iam.Policy(scope, 'PayloadReads', {
    statements: [
      new iam.PolicyStatement({ actions: ['s3:GetObject'], resources: [bucket.arnForObjects(`${prefix}*`)] }),
      new iam.PolicyStatement({
        actions: ['s3:ListBucket'],
        resources: [bucket.bucketArn],
        conditions: { StringLike: { 's3:prefix': `${prefix}*` } },
      }),
    ],
  });
  const role = worker.role;
  if (!role) throw new Error('LeaseqPipeline: the worker function has no role');
  reads.attachToRole(role);
  worker.node.addDependency(reads);
  acknowledgeObjectWildcard(reads, bucket, prefix, 'read');
  worker.addEnvironment(WORKER_ENV.payloadBucket, bucket.bucketName);
  worker.addEnvironment(WORKER_ENV.payloadPrefix, prefix);
}

/** A producer's puts: `s3:PutObject` on the objects under the prefix, nothing else. */
export function grantPayloadPuts(grantee: iam.IGrantable, bucket: s3.Bucket, prefix: string): void {
  iam.Grant.addToPrincipal({
    grantee,
    actions: ['s3:PutObject'],
    resourceArns: [bucket.arnForObjects(`${prefix}*`)],
  });
  if (grantee instanceof Construct) acknowledgeObjectWildcard(grantee, bucket, prefix, 'put');
}

/**
 * Acknowledges the `<bucket>/<prefix>*` resource of a grant on payload objects (one object per job, keys
 * unknown until the producer makes them).
 */
function acknowledgeObjectWildcard(
  scope: Construct,
  bucket: s3.Bucket,
  prefix: string,
  what: 'read' | 'put',
): void {
  const id = Stack.of(bucket).getLogicalId(bucket.node.defaultChild as s3.CfnBucket);
  Validations.of(scope).acknowledge({
    id: `AwsSolutions-IAM5[Resource::<${id}.Arn>/${prefix}*]`,
    reason: `Every job's payload is its own object under a key the producer makes, so the ${what} grant names the objects under the key prefix of this one bucket (s3:${what === 'read' ? 'GetObject' : 'PutObject'} only).`,
  });
}
