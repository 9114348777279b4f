import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, expect, it } from 'vitest';
import { deployLocal } from '../../../shared/local/deploy.ts';

const project = mkdtempSync(join(tmpdir(), 'leaseq-bootstrap-race-'));
afterAll(() => rmSync(project, { recursive: true, force: true }));

// A stand-in `cdk`: `bootstrap` counts itself and takes a while before the toolkit stack exists, as a real
// one does; `deploy` fails (this test is about the bootstrap only).
const bin = join(project, 'node_modules', '.bin');
mkdirSync(bin, { recursive: true });
writeFileSync(
  join(bin, 'cdk'),
  `#!/bin/sh
if [ "$1" = bootstrap ]; then
  echo run >> "${project}/bootstraps"
  sleep 1
  touch "${project}/toolkit-exists"
  exit 0
fi
exit 1
`,
);
chmodSync(join(bin, 'cdk'), 0o755);

/** CloudFormation as the emulator answers it: the toolkit stack exists once the stand-in made it. */
function cloudFormation(): CloudFormationClient {
  const client = new CloudFormationClient({ region: 'us-east-1' });
  client.send = (async (command: { constructor: { name: string } }) => {
    if (command.constructor.name === 'DescribeStacksCommand') {
      if (existsSync(join(project, 'toolkit-exists')))
        return { Stacks: [{ StackStatus: 'CREATE_COMPLETE' }] };
      throw new Error('Stack with id CDKToolkit does not exist');
    }
    return { StackEvents: [] };
  }) as unknown as CloudFormationClient['send'];
  return client;
}

it('bootstraps an emulator once when two deploys start together on it (found by a full run: one failed)', async () => {
  const deploy = () =>
    deployLocal({
      endpoint: `http://127.0.0.1:9/${project}`,
      region: 'us-east-1',
      projectDir: project,
      outputsFile: 'outputs.json',
      cloudFormation: cloudFormation(),
      // Never called: the deploy fails before the tables' gaps are closed.
      dynamodb: new DynamoDBClient({ region: 'us-east-1' }),
      log: () => {},
      lockDir: project,
    }).catch((error: Error) => error.message);

  const [a, b] = await Promise.all([deploy(), deploy()]);

  expect(readFileSync(join(project, 'bootstraps'), 'utf8').trim().split('\n')).toHaveLength(1);
  // Both went on to the deploy (which the stand-in fails), neither stopped at the bootstrap.
  expect([a, b]).toEqual([
    expect.stringMatching(/cdk deploy failed/),
    expect.stringMatching(/cdk deploy failed/),
  ]);
});
