import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { WORKER_ENV } from '../../shared/resources.ts';

const run = promisify(execFile);
const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CDK = join(REPO_ROOT, 'node_modules', '.bin', 'cdk');

interface TemplateResource {
  readonly Type: string;
  readonly Metadata?: Record<string, unknown>;
  readonly Properties?: { readonly Environment?: { readonly Variables?: Record<string, unknown> } };
}

// The one test that really bundles: `npx cdk synth` through cdk.json and infra/app.ts, as a newcomer or
// CI runs it. Docker is made unusable (CDK_DOCKER points nowhere) and AWS credentials are hidden, so the
// test passes only if the local esbuild bundles the worker and synthesis needs no account.
describe('App: infra/app.ts via cdk synth', () => {
  const outdir = mkdtempSync(join(tmpdir(), 'leaseq-cdk-synth-'));
  afterAll(() => rmSync(outdir, { recursive: true, force: true }));

  it('synthesizes offline and bundles the worker with local esbuild, without Docker', async () => {
    // Prepare
    const cliEnv: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: outdir,
      CDK_DOCKER: join(outdir, 'no-docker-here'),
      CDK_DISABLE_VERSION_CHECK: '1',
      AWS_CONFIG_FILE: join(outdir, 'no-aws-config'),
      AWS_SHARED_CREDENTIALS_FILE: join(outdir, 'no-aws-credentials'),
      AWS_EC2_METADATA_DISABLED: 'true',
      // CloudFormation's validation of the template, which the rest of the test run turns off.
      CDK_VALIDATION: 'true',
    };

    // Act
    const { stderr } = await run(CDK, ['synth', '--quiet', '--output', outdir, '-c', 'stage=ci'], {
      cwd: REPO_ROOT,
      env: cliEnv,
      // Generous: files run several at a time, and how fast synth is belongs to the benchmark, not a test.
      timeout: 150_000,
    });

    // Assess: the template and a bundled asset exist.
    const template = JSON.parse(readFileSync(join(outdir, 'leaseq-ci.template.json'), 'utf8')) as {
      Resources: Record<string, TemplateResource>;
    };
    const fn = Object.values(template.Resources).find((r) => r.Type === 'AWS::Lambda::Function');
    expect(fn?.Metadata?.['aws:asset:is-bundled']).toBe(true);
    const assetPath = fn?.Metadata?.['aws:asset:path'];
    expect(typeof assetPath).toBe('string');
    const bundle = join(outdir, String(assetPath), 'index.mjs');
    expect(existsSync(bundle)).toBe(true);
    expect(existsSync(`${bundle}.map`)).toBe(true);
    // CloudFormation's validation ran (its report is written only then) and passed (synth exited 0).
    expect(existsSync(join(outdir, 'validation-report.json'))).toBe(true);
    expect(stderr).not.toMatch(/docker/i);
    // No largePayloads in this app: the S3 client is not bundled, only its lazy import is left.
    expect(readFileSync(bundle, 'utf8')).toMatch(/import\(\s*["'`]@aws-sdk\/client-s3["'`]\s*\)/);
    expect(readFileSync(bundle, 'utf8')).not.toMatch(/s3-object-lambda/);

    // Assess: the bundle is a working ESM handler on plain Node, given the environment the stack sets
    // (CloudFormation references replaced by placeholders; an empty batch makes no AWS call).
    const workerEnv = Object.fromEntries(
      Object.entries(fn?.Properties?.Environment?.Variables ?? {}).map(([name, value]) => [
        name,
        typeof value === 'string'
          ? value
          : name.endsWith('_URL')
            ? 'http://127.0.0.1:9/000000000000/placeholder'
            : 'placeholder',
      ]),
    );
    expect(workerEnv[WORKER_ENV.maxAttempts]).toBe('5');
    const script = `
      const { handler } = await import(${JSON.stringify(pathToFileURL(bundle).href)});
      const context = { functionName: 'worker', awsRequestId: 'r1', getRemainingTimeInMillis: () => 60000 };
      process.stdout.write(JSON.stringify(await handler({ Records: [] }, context)));`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], {
      env: {
        PATH: process.env.PATH,
        ...workerEnv,
        POWERTOOLS_LOG_LEVEL: 'SILENT',
        AWS_REGION: 'us-east-1',
        AWS_ACCESS_KEY_ID: 'placeholder',
        AWS_SECRET_ACCESS_KEY: 'placeholder',
      },
      timeout: 30_000,
    });
    expect(JSON.parse(stdout)).toEqual({ batchItemFailures: [] });
  }, 180_000);
});
