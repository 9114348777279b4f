/**
 * Reading the stack template local provisioning works from: `LeaseqStack` synthesized in-process
 * (bundling skipped) and checked to be a CloudFormation template. Kept apart from the plan and its
 * application because it is the one step that needs aws-cdk-lib (an optional peer dependency).
 */
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import type { LeaseqStackProps } from '../../infra/leaseq-stack.ts';
import { JobRegistry } from '../core/model/registry.ts';
import { resolveOptions } from './emulator-config.ts';
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
/** Templates read from the store below, by their store key: one object per distinct props, as above. */
const storedTemplates = new Map<string, Promise<StackTemplate>>();

/**
 * The CloudFormation template of `LeaseqStack` for these props, as `cdk synth` would produce it
 * (same cdk.json feature flags) but without bundling the worker. Cached per distinct props for the life
 * of the process; treat the result as read-only.
 *
 * @param stackProps stack props; `stage` defaults to {@link DEFAULT_LOCAL_STAGE}.
 */
export async function synthesizedTemplate(stackProps: LeaseqStackProps = {}): Promise<StackTemplate> {
  const props: LeaseqStackProps = { ...stackProps, stage: stackProps.stage ?? DEFAULT_LOCAL_STAGE };
  // A template this code synthesized before for these props: no aws-cdk-lib at all.
  const storeKey = propsKey(props);
  const known = storeKey === undefined ? undefined : storedTemplates.get(storeKey);
  if (known) return known;
  const stored = storeKey === undefined ? undefined : readStoredTemplate(storeKey);
  if (storeKey !== undefined && stored) {
    storedTemplates.set(storeKey, Promise.resolve(stored));
    return stored;
  }
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
  const settings = resolveLeaseqStackProps(props);
  const jobs = stackJobs(props);
  const key = JSON.stringify({
    ...settings,
    // Jobs with the same tables and limits give the same template (the entry is not part of it locally;
    // the limits decide the worker role's actions).
    jobs: jobs
      .tables()
      .map((t) => JSON.stringify(t))
      .sort(),
    limits: jobs.limits(),
    workerTimeout: settings.workerTimeout.toSeconds({ integral: false }),
    description: props.description,
  });
  let cached = templateCache.get(key);
  if (!cached) {
    cached = Promise.resolve().then(() => {
      const outdir = mkdtempSync(join(tmpdir(), 'leaseq-synth-'));
      try {
        const { app, stack } = createLeaseqApp({ stackProps: props, bundle: false, outdir });
        const template = parseTemplate(app.synth().getStackByName(stack.stackName).template);
        if (storeKey !== undefined) storeTemplate(storeKey, template);
        return template;
      } finally {
        rmSync(outdir, { recursive: true, force: true });
      }
    });
    templateCache.set(key, cached);
    cached.catch(() => templateCache.delete(key));
    if (storeKey !== undefined) {
      storedTemplates.set(storeKey, cached);
      cached.catch(() => storedTemplates.delete(storeKey));
    }
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

/**
 * Synthesized templates kept on disk, so each process that provisions (every integration test file, the
 * chaos and benchmark runs, `leaseq start`, `leaseq local provision`) does not synthesize the same stack
 * again: about 1.5 s of CPU each. An entry is found by the props' key (as the in-process cache above)
 * and a fingerprint of everything else the template depends on: the source of `infra/` and `shared/`
 * (in a checkout or the installed package alike), cdk.json, aws-cdk-lib's version, whether CDK's own
 * validation is on, and the CDK context the environment gives (CDK_CONTEXT_JSON and its overflow file).
 * Kept in the state directory (`.leaseq/synth-cache/`, owner-only), at most {@link STORE_LIMIT} entries;
 * `LEASEQ_SYNTH_CACHE=0` turns it off. A damaged entry is synthesized again.
 */
const STORE_LIMIT = 64;
let fingerprintMemo: string | undefined;

/**
 * The on-disk key of a template: the props as given, with the job module reduced to its types and
 * tables and the timeout to seconds; computed without aws-cdk-lib. Undefined (no store) when the props
 * do not reduce (a job module the registry refuses: the synthesis then reports it).
 */
function propsKey(props: LeaseqStackProps): string | undefined {
  try {
    const { jobs, workerTimeout, ...rest } = props;
    const registry = jobs === undefined ? undefined : JobRegistry.from(jobs);
    return JSON.stringify(
      {
        ...rest,
        workerTimeout: workerTimeout?.toSeconds({ integral: false }),
        jobs: registry
          ? {
              types: registry.types().sort(),
              limits: registry.limits(),
              tables: registry
                .tables()
                .map((t) => JSON.stringify(t))
                .sort(),
            }
          : 'default',
      },
      (_, value: unknown) => (typeof value === 'function' || typeof value === 'symbol' ? undefined : value),
    );
  } catch {
    return undefined;
  }
}

function storeDir(): string | undefined {
  if (process.env.LEASEQ_SYNTH_CACHE === '0') return undefined;
  return join(resolveOptions({}).stateDir, 'synth-cache');
}

/** A digest of the code and settings the template depends on besides its props (memoized per process). */
function sourceFingerprint(): string {
  if (fingerprintMemo) return fingerprintMemo;
  const hash = createHash('sha256');
  // The stack's code, the library it uses, and the ledger example (the default job module).
  const roots = [
    new URL('../../infra/', import.meta.url),
    new URL('../', import.meta.url),
    new URL('../../examples/ledger/', import.meta.url),
  ];
  for (const root of roots) {
    const dir = fileURLToPath(root);
    if (!existsSync(dir)) continue;
    const files = readdirSync(dir, { recursive: true, encoding: 'utf8' })
      .filter((f) => /\.(ts|js|mjs)$/.test(f) && !f.split(/[\\/]/).includes('node_modules'))
      .sort();
    for (const file of files) {
      hash.update(`${root.href}${file}\0`);
      hash.update(readFileSync(join(dir, file)));
    }
  }
  const require = createRequire(import.meta.url);
  for (const extra of [
    () => readFileSync(fileURLToPath(new URL('../../cdk.json', import.meta.url))),
    () => String((require('aws-cdk-lib/package.json') as { version?: string }).version),
  ]) {
    try {
      hash.update(extra());
    } catch {
      hash.update('-');
    }
  }
  hash.update(`validation=${process.env.CDK_VALIDATION ?? ''}`);
  // CDK's App reads context from the environment over the app's own (`cdk` sets it for an app it runs).
  hash.update(`context=${process.env.CDK_CONTEXT_JSON ?? ''}\0`);
  const overflow = process.env.CDK_CONTEXT_OVERFLOW_LOCATION;
  if (overflow) {
    try {
      hash.update(readFileSync(overflow));
    } catch {
      hash.update(`unreadable ${overflow}`);
    }
  }
  fingerprintMemo = hash.digest('hex');
  return fingerprintMemo;
}

function storeFile(key: string): string | undefined {
  const dir = storeDir();
  if (!dir) return undefined;
  const name = createHash('sha256').update(sourceFingerprint()).update(key).digest('hex').slice(0, 32);
  return join(dir, `${name}.json`);
}

function readStoredTemplate(key: string): StackTemplate | undefined {
  try {
    const file = storeFile(key);
    if (!file) return undefined;
    return parseTemplate(JSON.parse(readFileSync(file, 'utf8')));
  } catch {
    return undefined;
  }
}

function storeTemplate(key: string, template: StackTemplate): void {
  try {
    const file = storeFile(key);
    const dir = storeDir();
    if (!file || !dir) return;
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    // Written aside and renamed: a reader in another process never sees half a file.
    const partial = `${file}.${process.pid}.partial`;
    writeFileSync(partial, JSON.stringify(template), { mode: 0o600 });
    renameSync(partial, file);
    const entries = readdirSync(dir).filter((f) => f.endsWith('.json'));
    if (entries.length > STORE_LIMIT) {
      const byAge = entries
        .map((f) => ({ f, at: statSync(join(dir, f)).mtimeMs }))
        .sort((a, b) => a.at - b.at);
      for (const { f } of byAge.slice(0, entries.length - STORE_LIMIT)) rmSync(join(dir, f), { force: true });
    }
  } catch {
    // A store that cannot be written only costs the next process a synthesis.
  }
}
