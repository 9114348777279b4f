import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { describe, expect, it } from 'vitest';
import { destroyLocal } from '../../../shared/local/deploy.ts';
import { emulatorStacks } from '../../../shared/local/deployed-stacks.ts';

/** A CloudFormation stand-in holding `stacks` (name -> function names); it records the calls it got. */
function cloudFormation(stacks: Record<string, string[]>) {
  const calls: string[] = [];
  const client = new CloudFormationClient({ region: 'us-east-1' });
  client.send = (async (command: { constructor: { name: string }; input: { StackName?: string } }) => {
    calls.push(command.constructor.name);
    if (command.constructor.name === 'ListStacksCommand') {
      return {
        StackSummaries: Object.keys(stacks).map((StackName) => ({
          StackName,
          StackStatus: 'CREATE_COMPLETE',
        })),
      };
    }
    const functions = stacks[command.input.StackName ?? ''] ?? [];
    return {
      StackResources: functions.map((PhysicalResourceId) => ({
        ResourceType: 'AWS::Lambda::Function',
        PhysicalResourceId,
      })),
    };
  }) as unknown as CloudFormationClient['send'];
  return { client, calls };
}

describe('Function: destroyLocal / emulatorStacks', () => {
  it('names the stacks on the emulator for the question, never the bootstrap stack', async () => {
    const cfn = cloudFormation({ CDKToolkit: [], 'shop-dev': ['shop-fn'], 'leaseq-dev': ['worker'] });
    expect(await emulatorStacks(cfn.client)).toEqual(['leaseq-dev', 'shop-dev']);
  });

  it('with only the bootstrap stack there destroys nothing and runs no cdk', async () => {
    // A project with no cdk installed: running cdk would throw "no cdk in ...".
    const cfn = cloudFormation({ CDKToolkit: [] });
    const lines: string[] = [];
    const result = await destroyLocal({
      endpoint: 'http://127.0.0.1:9',
      region: 'us-east-1',
      projectDir: '/nonexistent-project',
      stacks: ['Prod/*'],
      cloudFormation: cfn.client,
      log: (line) => lines.push(line),
    });
    expect(result).toMatchObject({ destroyed: [], stoppedWorkers: 0 });
    expect(lines).toEqual(['no stack on http://127.0.0.1:9: nothing to destroy']);
  });

  it('passes ids and patterns to cdk instead of looking them up as stack names (review of issue 20)', async () => {
    // `Prod/*` names no CloudFormation stack; cdk matches it against the app's ids. Here cdk is missing,
    // so reaching it is the error; before, the lookup ended with "nothing to destroy" and cdk never ran.
    const cfn = cloudFormation({ CDKToolkit: [], 'Prod-Shop': ['shop-fn'] });
    const error = await destroyLocal({
      endpoint: 'http://127.0.0.1:9',
      region: 'us-east-1',
      projectDir: '/nonexistent-project',
      stacks: ['Prod/*'],
      cloudFormation: cfn.client,
      log: () => undefined,
    }).catch((e: unknown) => e);
    expect(String(error)).toMatch(/no cdk in \/nonexistent-project/);
  });
});
