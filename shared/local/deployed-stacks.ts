// What a local deploy finds after cdk ran (deploy.ts): the stacks of the cloud assembly cdk synthesized,
// the stacks on the emulator and their functions, the first failed event of a failed deploy, the outputs
// file, and the table settings the emulator's CloudFormation drops, set afterwards from the template.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import {
  DescribeContinuousBackupsCommand,
  DescribeTimeToLiveCommand,
  type DynamoDBClient,
  UpdateContinuousBackupsCommand,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import { cloudFormationSdk } from './deploy-env.ts';
import { DeployError } from './emulator-errors.ts';

/** The stack `cdk bootstrap` makes; never the user's to destroy. */
export const BOOTSTRAP_STACK = 'CDKToolkit';

/** The stacks on the emulator now (but the bootstrap stack), for a destroy's confirmation to name. */
export async function emulatorStacks(cfn: CloudFormationClient): Promise<string[]> {
  return [...(await stackFunctions(cfn)).keys()].filter((stack) => stack !== BOOTSTRAP_STACK).sort();
}

/** The Lambda functions of every stack on the emulator, by stack name. */
export async function stackFunctions(cfn: CloudFormationClient): Promise<Map<string, string[]>> {
  const { DescribeStackResourcesCommand, paginateListStacks } = await cloudFormationSdk();
  const functions = new Map<string, string[]>();
  for await (const page of paginateListStacks({ client: cfn }, {})) {
    for (const summary of page.StackSummaries ?? []) {
      const name = summary.StackName;
      if (!name || summary.StackStatus === 'DELETE_COMPLETE' || functions.has(name)) continue;
      const resources = await cfn
        .send(new DescribeStackResourcesCommand({ StackName: name }))
        .catch(() => ({ StackResources: [] }));
      functions.set(
        name,
        (resources.StackResources ?? [])
          .filter((r) => r.ResourceType === 'AWS::Lambda::Function' && r.PhysicalResourceId)
          .map((r) => r.PhysicalResourceId as string),
      );
    }
  }
  return functions;
}

/** Whether the emulator has `stackName` (and it is not deleted). */
export async function stackExists(cfn: CloudFormationClient, stackName: string): Promise<boolean> {
  try {
    const { DescribeStacksCommand } = await cloudFormationSdk();
    const out = await cfn.send(new DescribeStacksCommand({ StackName: stackName }));
    const status = out.Stacks?.[0]?.StackStatus;
    return status !== undefined && status !== 'DELETE_COMPLETE';
  } catch (error) {
    if (error instanceof Error && /does not exist/i.test(error.message)) return false;
    throw error;
  }
}

/** The first failed resource event of the stacks' latest operations, as one line. */
export async function firstFailedEvent(
  cfn: CloudFormationClient,
  stackNames: readonly string[],
): Promise<string | undefined> {
  const { DescribeStackEventsCommand } = await cloudFormationSdk();
  for (const stackName of stackNames) {
    try {
      const out = await cfn.send(new DescribeStackEventsCommand({ StackName: stackName }));
      const failed = (out.StackEvents ?? []).find((e) => e.ResourceStatus?.endsWith('_FAILED'));
      if (failed)
        return `${failed.LogicalResourceId} (${failed.ResourceType}) ${failed.ResourceStatus}: ${failed.ResourceStatusReason ?? 'no reason given'}`;
    } catch {
      // no such stack (it was never created): look at the next
    }
  }
  return undefined;
}

/** A stack of the cloud assembly `cdk` synthesized. */
export interface AssemblyStack {
  /** The artifact id, e.g. `Shop` or `Prod/Shop` in a stage (what `cdk deploy` also accepts). */
  readonly id: string;
  readonly stackName: string;
  readonly templateFile: string;
}

/** The stacks of the cloud assembly in `dir` (`manifest.json`), nested assemblies (stages) included. */
export function assemblyStacks(dir: string): AssemblyStack[] {
  let manifest: {
    artifacts?: Record<
      string,
      {
        type?: string;
        displayName?: string;
        properties?: { templateFile?: string; stackName?: string; directoryName?: string };
      }
    >;
  };
  try {
    manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'));
  } catch {
    return [];
  }
  const stacks: AssemblyStack[] = [];
  for (const [id, artifact] of Object.entries(manifest.artifacts ?? {})) {
    const props = artifact.properties ?? {};
    if (artifact.type === 'aws:cloudformation:stack' && props.templateFile) {
      stacks.push({
        id: artifact.displayName ?? id,
        stackName: props.stackName ?? id,
        templateFile: join(dir, props.templateFile),
      });
    } else if (artifact.type === 'cdk:cloud-assembly' && props.directoryName) {
      stacks.push(...assemblyStacks(join(dir, props.directoryName)));
    }
  }
  return stacks;
}

/**
 * The stacks `names` pick (stack name or id; `*` matches any text, as in `cdk deploy 'Prod/*'`), or
 * every stack when none is named.
 */
export function selectStacks(stacks: readonly AssemblyStack[], names: readonly string[] | undefined) {
  if (!names || names.length === 0) return stacks;
  const patterns = names.map(
    (name) => new RegExp(`^${name.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`),
  );
  return stacks.filter((s) => patterns.some((p) => p.test(s.stackName) || p.test(s.id)));
}

/** The outputs `cdk deploy --outputs-file` wrote for the stack. */
export function readStackOutputs(file: string, stackName: string): Record<string, string> {
  const parsed = JSON.parse(readFileSync(file, 'utf8')) as Record<string, Record<string, string>>;
  const outputs = parsed[stackName];
  if (!outputs) throw new DeployError(`${file} has no outputs for ${stackName}`);
  return outputs;
}

interface TableSettings {
  readonly ttlAttribute?: string;
  readonly pointInTimeRecovery: boolean;
}

/**
 * Sets what the emulator's CloudFormation drops from `AWS::DynamoDB::Table`: time to live and point in
 * time recovery, as the stack's synthesized template declares them. Returns a line per change.
 */
export async function closeTableGaps(
  options: { readonly cloudFormation: CloudFormationClient; readonly dynamodb: DynamoDBClient },
  stackName: string,
  templateFile: string,
): Promise<string[]> {
  const declared = tableSettingsFromTemplate(templateFile);
  if (declared.size === 0) return [];
  const { DescribeStackResourcesCommand } = await cloudFormationSdk();
  const resources = await options.cloudFormation.send(
    new DescribeStackResourcesCommand({ StackName: stackName }),
  );
  const lines: string[] = [];
  for (const resource of resources.StackResources ?? []) {
    const settings = resource.LogicalResourceId ? declared.get(resource.LogicalResourceId) : undefined;
    const table = resource.PhysicalResourceId;
    if (!settings || !table) continue;
    if (settings.ttlAttribute) {
      const ttl = await options.dynamodb.send(new DescribeTimeToLiveCommand({ TableName: table }));
      if (ttl.TimeToLiveDescription?.TimeToLiveStatus !== 'ENABLED') {
        await options.dynamodb.send(
          new UpdateTimeToLiveCommand({
            TableName: table,
            TimeToLiveSpecification: { AttributeName: settings.ttlAttribute, Enabled: true },
          }),
        );
        lines.push(`set TTL on ${table} (${settings.ttlAttribute}): the emulator's CloudFormation drops it`);
      }
    }
    if (settings.pointInTimeRecovery) {
      const backups = await options.dynamodb
        .send(new DescribeContinuousBackupsCommand({ TableName: table }))
        .catch(() => undefined);
      const status =
        backups?.ContinuousBackupsDescription?.PointInTimeRecoveryDescription?.PointInTimeRecoveryStatus;
      if (backups && status !== 'ENABLED') {
        await options.dynamodb.send(
          new UpdateContinuousBackupsCommand({
            TableName: table,
            PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
          }),
        );
        lines.push(`set point-in-time recovery on ${table}: the emulator's CloudFormation drops it`);
      }
    }
  }
  return lines;
}

/** TTL and PITR of each `AWS::DynamoDB::Table` in a synthesized template, by logical id. */
function tableSettingsFromTemplate(file: string): Map<string, TableSettings> {
  const template = JSON.parse(readFileSync(file, 'utf8')) as {
    Resources?: Record<string, { Type?: string; Properties?: Record<string, unknown> }>;
  };
  const settings = new Map<string, TableSettings>();
  for (const [id, resource] of Object.entries(template.Resources ?? {})) {
    if (resource.Type !== 'AWS::DynamoDB::Table') continue;
    const props = resource.Properties ?? {};
    const ttl = props.TimeToLiveSpecification as { AttributeName?: string; Enabled?: boolean } | undefined;
    const pitr = props.PointInTimeRecoverySpecification as
      | { PointInTimeRecoveryEnabled?: boolean }
      | undefined;
    settings.set(id, {
      ...(ttl?.Enabled && ttl.AttributeName ? { ttlAttribute: ttl.AttributeName } : {}),
      pointInTimeRecovery: pitr?.PointInTimeRecoveryEnabled === true,
    });
  }
  return settings;
}
