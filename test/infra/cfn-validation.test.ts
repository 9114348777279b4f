import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, CfnResource } from 'aws-cdk-lib';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  BUNDLING_STACKS_CONTEXT,
  cdkJsonContext,
  leaseqStackName,
  stackPropsFromContext,
} from '../../infra/leaseq-app.ts';
import { LeaseqStack } from '../../infra/leaseq-stack.ts';
import { LOCAL_DEPLOY_CONTEXT } from '../../shared/local/deploy.ts';
import { DEFAULT_LOCAL_STAGE } from '../../shared/local/provision-template.ts';

// aws-cdk-lib checks every synthesized template against CloudFormation's schemas (a WASM engine that
// costs about 8 s of CPU in each process that synthesizes); with cdk.json's validateAgainstDefaultRules
// a finding fails the synth. The test run turns it off (vitest.config.ts: CDK_VALIDATION=false) for the
// many processes that synthesize the same stack again (local provisioning in each integration file,
// every `leaseq local deploy|destroy`), so the check is made here, once, for each variant of the stack
// those tests synthesize or deploy; test/infra/cdk-synth.test.ts and the tarball test keep it on too.

const VARIANTS: readonly (readonly [string, Record<string, string>])[] = [
  ['local provisioning (the default stage)', { stage: DEFAULT_LOCAL_STAGE }],
  ['local provisioning, FIFO', { stage: DEFAULT_LOCAL_STAGE, fifo: 'true' }],
  [
    'the deploy test (test hooks, short leases, one job per batch)',
    {
      ...LOCAL_DEPLOY_CONTEXT,
      stage: 'e2e',
      testHooks: 'true',
      leaseMs: '3000',
      maxAttempts: '3',
      batchSize: '1',
      workerTimeoutSeconds: '20',
    },
  ],
  [
    '`leaseq start --runtime lambda` (stage demo)',
    {
      ...LOCAL_DEPLOY_CONTEXT,
      stage: 'demo',
      testHooks: 'true',
      leaseMs: '3000',
      maxAttempts: '5',
      workerTimeoutSeconds: '16',
      maxConcurrency: '3',
    },
  ],
  ['a FIFO deploy', { ...LOCAL_DEPLOY_CONTEXT, stage: 'fifo', fifo: 'true' }],
];

const outdirs: string[] = [];

/** infra/app.ts as `cdk synth` runs it (cdk.json's flags, `-c` context), without bundling the worker. */
function synth(context: Record<string, string>, extra?: (stack: LeaseqStack) => void): string {
  const outdir = mkdtempSync(join(tmpdir(), 'leaseq-cfn-validation-'));
  outdirs.push(outdir);
  const app = new App({
    outdir,
    context: { ...cdkJsonContext(), [BUNDLING_STACKS_CONTEXT]: [], ...context },
  });
  const props = stackPropsFromContext(app);
  const stack = new LeaseqStack(app, leaseqStackName(props.stage ?? 'dev'), props);
  extra?.(stack);
  app.synth();
  return outdir;
}

describe("aws-cdk-lib's CloudFormation validation of the stacks the tests synthesize with it off", () => {
  beforeAll(() => {
    vi.stubEnv('CDK_VALIDATION', 'true');
  });
  afterAll(() => {
    vi.unstubAllEnvs();
    for (const dir of outdirs) rmSync(dir, { recursive: true, force: true });
  });

  it('fails the synth of a template CloudFormation would refuse (the check is on here)', () => {
    expect(() =>
      synth({ stage: 'broken' }, (stack) => {
        new CfnResource(stack, 'Broken', {
          type: 'AWS::SQS::Queue',
          properties: { NoSuchQueueProperty: 1 },
        });
      }),
    ).toThrow(/ValidationFailed|NoSuchQueueProperty/);
    // The first synth starts the validator (seconds of CPU): on a loaded machine it took 62 s.
  }, 180_000);

  it.each(VARIANTS)(
    'passes %s',
    (_name, context) => {
      const outdir = synth(context);
      // Written only when the validation ran.
      expect(existsSync(join(outdir, 'validation-report.json'))).toBe(true);
    },
    180_000,
  );
});
