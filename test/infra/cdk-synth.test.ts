import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { afterAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CDK = join(REPO_ROOT, 'node_modules', '.bin', 'cdk');

interface TemplateResource {
  readonly Type: string;
  readonly Metadata?: Record<string, unknown>;
}

// The one test that really bundles: `npx cdk synth` through cdk.json and infra/app.ts, as a newcomer or
// CI runs it. Docker is made unusable (CDK_DOCKER points nowhere) and AWS credentials are hidden, so the
// test passes only if the local esbuild bundles the worker and synthesis needs no account.
describe('App: infra/app.ts via cdk synth', () => {
  const outdir = mkdtempSync(join(tmpdir(), 'leaseq-cdk-synth-'));
  afterAll(() => rmSync(outdir, { recursive: true, force: true }));

  it('synthesizes offline and bundles the worker with local esbuild, without Docker', async () => {
    // Prepare
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: outdir,
      CDK_DOCKER: join(outdir, 'no-docker-here'),
      CDK_DISABLE_VERSION_CHECK: '1',
      AWS_CONFIG_FILE: join(outdir, 'no-aws-config'),
      AWS_SHARED_CREDENTIALS_FILE: join(outdir, 'no-aws-credentials'),
      AWS_EC2_METADATA_DISABLED: 'true',
    };

    // Act
    const started = performance.now();
    const { stderr } = await run(CDK, ['synth', '--quiet', '--output', outdir, '-c', 'stage=ci'], {
      cwd: REPO_ROOT,
      env,
      timeout: 60_000,
    });
    const seconds = (performance.now() - started) / 1000;

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
    expect(stderr).not.toMatch(/docker/i);
    expect(seconds).toBeLessThan(30);

    // Assess: the bundle is a working ESM handler.
    const previousLevel = process.env.POWERTOOLS_LOG_LEVEL;
    process.env.POWERTOOLS_LOG_LEVEL = 'SILENT';
    try {
      const mod = (await import(pathToFileURL(bundle).href)) as {
        handler: (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>;
      };
      const event = { Records: [] } satisfies SQSEvent;
      await expect(mod.handler(event, {} as Context)).resolves.toEqual({ batchItemFailures: [] });
    } finally {
      if (previousLevel === undefined) delete process.env.POWERTOOLS_LOG_LEVEL;
      else process.env.POWERTOOLS_LOG_LEVEL = previousLevel;
    }
  });
});
