/**
 * Reading the stack template local provisioning works from: `LeaseqStack` synthesized in-process
 * (bundling skipped) and checked to be a CloudFormation template. Kept apart from the plan and its
 * application because it is the one step that needs aws-cdk-lib (an optional peer dependency).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import type { LeaseqStackProps } from '../../infra/leaseq-stack.ts';
import { LocalProvisionError } from './emulator-errors.ts';

/** The parts of a synthesized CloudFormation template local provisioning reads. */
export interface StackTemplate {
  readonly Resources: Readonly<Record<string, TemplateResource>>;
  readonly Outputs?: Readonly<Record<string, { readonly Value: unknown; readonly Description?: string }>>;
}

export interface TemplateResource {
  readonly Type: string;
  readonly Properties?: Readonly<Record<string, unknown>>;
}

/** The stage local provisioning synthesizes when none is given. */
export const DEFAULT_LOCAL_STAGE = 'local';

const templateCache = new Map<string, Promise<StackTemplate>>();

/**
 * The CloudFormation template of `LeaseqStack` for these props, as `cdk synth` would produce it
 * (same cdk.json feature flags) but without bundling the worker. Cached per distinct props for the life
 * of the process; treat the result as read-only.
 *
 * @param stackProps stack props; `stage` defaults to {@link DEFAULT_LOCAL_STAGE}.
 */
export async function synthesizedTemplate(stackProps: LeaseqStackProps = {}): Promise<StackTemplate> {
  // aws-cdk-lib is loaded only when a template is needed (it takes a few hundred ms to import).
  const [{ resolveLeaseqStackProps, stackJobs }, { createLeaseqApp }] = await Promise.all([
    import('../../infra/leaseq-stack.ts'),
    import('../../infra/leaseq-app.ts'),
  ]).catch((error: unknown) => {
    // aws-cdk-lib is an optional peer dependency: a producer-only install does not have it.
    if (
      error instanceof Error &&
      /Cannot find (package|module) '(aws-cdk-lib|constructs)/.test(error.message)
    ) {
      throw new LocalProvisionError(
        'local provisioning synthesizes the CDK stack: install aws-cdk-lib and constructs (npm install aws-cdk-lib constructs)',
        { cause: error },
      );
    }
    throw error;
  });
  const props: LeaseqStackProps = { ...stackProps, stage: stackProps.stage ?? DEFAULT_LOCAL_STAGE };
  const settings = resolveLeaseqStackProps(props);
  const key = JSON.stringify({
    ...settings,
    // Jobs with the same types and tables give the same template (the entry is not part of it locally).
    jobs: stackJobs(props)
      .tables()
      .map((t) => JSON.stringify(t))
      .sort(),
    workerTimeout: settings.workerTimeout.toSeconds({ integral: false }),
    description: props.description,
  });
  let cached = templateCache.get(key);
  if (!cached) {
    cached = Promise.resolve().then(() => {
      const outdir = mkdtempSync(join(tmpdir(), 'leaseq-synth-'));
      try {
        const { app, stack } = createLeaseqApp({ stackProps: props, bundle: false, outdir });
        const template: unknown = app.synth().getStackByName(stack.stackName).template;
        return parseTemplate(template);
      } finally {
        rmSync(outdir, { recursive: true, force: true });
      }
    });
    templateCache.set(key, cached);
    cached.catch(() => templateCache.delete(key));
  }
  return cached;
}

const templateSchema = z.object({
  Resources: z.record(
    z.string(),
    z.object({ Type: z.string(), Properties: z.record(z.string(), z.unknown()).optional() }),
  ),
  Outputs: z
    .record(z.string(), z.object({ Value: z.unknown(), Description: z.string().optional() }))
    .optional(),
});

function parseTemplate(template: unknown): StackTemplate {
  const parsed = templateSchema.safeParse(template);
  if (!parsed.success) {
    throw new LocalProvisionError(
      `synthesized template is not a CloudFormation template: ${z.prettifyError(parsed.error)}`,
    );
  }
  return parsed.data;
}
