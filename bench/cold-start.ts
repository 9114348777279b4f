// Cold start of the worker Lambda's bundle: built the way the construct builds it (infra/constructs/
// worker-function.ts: local esbuild, ESM, node22, minified, a source map without sources, the S3 client
// left out without large payloads), its size by package from esbuild's metafile, and its init time: a
// fresh Node process, with the NODE_OPTIONS the construct sets (--enable-source-maps), importing the
// bundle and building the handler, as Lambda's init phase does. Wall and CPU time (user + system of the
// process, its compiler and GC threads included) per sample. A second bundle, leaseq's worker with no
// job module, is timed interleaved with it: the difference is what the job module (the ledger example
// and its own dependencies) adds. Figures only, never asserted. `tsx bench/cold-start.ts [samples]`
// prints them; the side-by-side benchmark calls coldStart().
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Metafile } from 'esbuild';
import { workerExternalModules } from '../infra/constructs/worker-function.ts';
import { WORKER_ENV } from '../shared/resources.ts';
import { type Spread, spread } from './report.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
/** The job module the reference worker (functions/worker.ts) runs. */
const JOB_MODULE = 'examples/ledger/jobs.ts';

/** Init of one bundle over fresh processes, ms. */
export interface InitTime {
  /** Import + handler built, wall clock. */
  readonly wall: Spread;
  /** CPU (user + system) of the process over the same span. */
  readonly cpu: Spread;
}

/** What the cold-start measurement found. */
export interface ColdStart {
  readonly entry: string;
  readonly bundleBytes: number;
  /** The source map beside it (read and parsed at init: the construct sets --enable-source-maps). */
  readonly sourceMapBytes: number;
  /** Bytes of the bundle's output by package (`leaseq` for this repository's own code), largest first. */
  readonly byPackage: readonly { readonly name: string; readonly bytes: number }[];
  /**
   * The job module's share of the bundle: bytes only it reaches (its own code, dependencies leaseq does
   * not use), and the packages it uses that leaseq bundles anyway (their bytes are leaseq's too).
   */
  readonly jobModule: {
    readonly path: string;
    readonly ownBytes: number;
    readonly own: readonly { readonly name: string; readonly bytes: number }[];
    readonly sharedWithLeaseq: readonly { readonly name: string; readonly bytes: number }[];
  };
  /** Packages evaluated at init that only tracing needs (none is the target). */
  readonly tracingAtInit: readonly string[];
  /** Init (import + handler built) in a fresh process, wall ms: median, min, max over the samples. */
  readonly initMs: Spread;
  /** CPU ms of the same inits. */
  readonly initCpuMs: Spread;
  /** leaseq's worker with no job module, built and timed the same way, interleaved with the above. */
  readonly leaseqOnly: { readonly bundleBytes: number } & InitTime;
  /** The target the issue sets. */
  readonly targetInitMs: number;
}

function packageOf(input: string): string {
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(input);
  return m?.[1] ?? 'leaseq';
}

/** Builds `entry` as the construct does (with its source map); the metafile and the output's path. */
async function bundle(entry: string, outfile: string): Promise<Metafile> {
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node22',
    mainFields: ['module', 'main'],
    banner: {
      js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);",
    },
    external: workerExternalModules(false),
    minify: true,
    sourcemap: true,
    sourcesContent: false,
    metafile: true,
    outfile,
    logLevel: 'silent',
  });
  return result.metafile;
}

/** Inputs `from` reaches by static imports (what is evaluated when it is; a dynamic import is not). */
function reachedFrom(
  inputs: Metafile['inputs'],
  from: (path: string) => boolean,
  skip = (_: string) => false,
) {
  const reached = new Set<string>();
  const stack = Object.keys(inputs).filter(from);
  while (stack.length > 0) {
    const next = stack.pop() as string;
    if (reached.has(next) || skip(next)) continue;
    reached.add(next);
    for (const imp of inputs[next]?.imports ?? []) {
      if (imp.kind !== 'dynamic-import' && !imp.external && inputs[imp.path]) stack.push(imp.path);
    }
  }
  return reached;
}

/** This repository's code by its folder (`examples/ledger`), a dependency by its package. */
function folderOf(input: string): string {
  if (input.includes('node_modules/')) return packageOf(input);
  return input.replace(/^(\.\.\/)+[^/]+\//, '').replace(/\/[^/]*$/, '');
}

/** Output bytes summed by `nameOf` of each input, largest first. */
function bytesByPackage(
  sizes: Iterable<[string, number]>,
  nameOf: (input: string) => string = packageOf,
): { name: string; bytes: number }[] {
  const byName = new Map<string, number>();
  for (const [input, bytes] of sizes) byName.set(nameOf(input), (byName.get(nameOf(input)) ?? 0) + bytes);
  return [...byName].map(([name, bytes]) => ({ name, bytes })).sort((a, b) => b.bytes - a.bytes);
}

/** Builds functions/worker.ts as the construct does and times its init `samples` times. */
export async function coldStart(samples = 15): Promise<ColdStart> {
  const dir = mkdtempSync(join(tmpdir(), 'leaseq-cold-'));
  try {
    const outfile = join(dir, 'worker', 'index.mjs');
    const meta = await bundle(join(ROOT, 'functions/worker.ts'), outfile);
    // leaseq's worker alone: the same handler with no job module.
    const bareEntry = join(dir, 'bare-worker.ts');
    writeFileSync(
      bareEntry,
      `import { createWorkerHandler } from ${JSON.stringify(join(ROOT, 'shared/worker/handler.ts'))};\n` +
        'export const handler = createWorkerHandler({ jobs: [] });\n',
    );
    const bareOutfile = join(dir, 'bare', 'index.mjs');
    await bundle(bareEntry, bareOutfile);

    const output = Object.values(meta.outputs).find((o) => o.entryPoint !== undefined);
    const outputInputs = Object.entries(output?.inputs ?? {}).map(
      ([input, { bytesInOutput }]) => [input, bytesInOutput] as [string, number],
    );
    const byPackage = bytesByPackage(outputInputs);
    // The job module's share: what it reaches that leaseq's side (the entry without the job module) does not.
    const fromJobs = reachedFrom(meta.inputs, (p) => p.endsWith(JOB_MODULE));
    const fromLeaseq = reachedFrom(
      meta.inputs,
      (p) => p.endsWith('functions/worker.ts'),
      (p) => p.endsWith(JOB_MODULE),
    );
    const own = bytesByPackage(
      outputInputs.filter(([input]) => fromJobs.has(input) && !fromLeaseq.has(input)),
      folderOf,
    );
    const usedPackages = new Set([...fromJobs].map(packageOf));
    const leaseqPackages = new Set([...fromLeaseq].map(packageOf));
    const sharedWithLeaseq = byPackage.filter(
      (p) => p.name !== 'leaseq' && usedPackages.has(p.name) && leaseqPackages.has(p.name),
    );

    // The init a Lambda runs: import the bundle (its top level builds the handler from the environment).
    const probe = join(dir, 'probe.mjs');
    writeFileSync(
      probe,
      [
        'const c0 = process.cpuUsage();',
        'const t0 = performance.now();',
        'await import(process.argv[2]);',
        'const ms = performance.now() - t0;',
        'const c = process.cpuUsage(c0);',
        'console.log(JSON.stringify({ ms, cpuMs: (c.user + c.system) / 1000 }));',
      ].join('\n'),
    );
    const env = {
      PATH: process.env.PATH ?? '',
      // What the construct sets: stack traces through the bundled source map (read at init).
      NODE_OPTIONS: '--enable-source-maps',
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'cold',
      AWS_SECRET_ACCESS_KEY: 'cold',
      [WORKER_ENV.jobsQueueUrl]: 'https://sqs.us-east-1.amazonaws.com/000000000000/cold-jobs',
      [WORKER_ENV.dlqUrl]: 'https://sqs.us-east-1.amazonaws.com/000000000000/cold-jobs-dlq',
      [WORKER_ENV.jobsTable]: 'cold-jobs',
      [WORKER_ENV.leasesTable]: 'cold-leases',
      LEASEQ_TABLE_LEDGER: 'cold-ledger',
      POWERTOOLS_LOG_LEVEL: 'SILENT',
    };
    const runs = {
      worker: { wall: [] as number[], cpu: [] as number[] },
      bare: { wall: [] as number[], cpu: [] as number[] },
    };
    // Interleaved, so both see the same load on a shared machine.
    for (let i = 0; i < samples; i++) {
      for (const [name, file] of [
        ['worker', outfile],
        ['bare', bareOutfile],
      ] as const) {
        const out = execFileSync(process.execPath, [probe, file], { env, encoding: 'utf8' });
        const line = JSON.parse(out.trim().split('\n').pop() ?? '{}') as { ms: number; cpuMs: number };
        runs[name].wall.push(line.ms);
        runs[name].cpu.push(line.cpuMs);
      }
    }
    // Modules evaluated at init: those the entry reaches by static imports. Of those, the tracing SDK's
    // packages are what a worker without tracing never uses (@opentelemetry/api stays: leaseq's spans
    // call its no-op tracer).
    const reached = reachedFrom(meta.inputs, (p) => p.endsWith('functions/worker.ts'));
    const tracingAtInit = [...new Set([...reached].map(packageOf))]
      .filter((name) => name.startsWith('@opentelemetry/') && name !== '@opentelemetry/api')
      .sort();
    return {
      entry: 'functions/worker.ts',
      bundleBytes: statSync(outfile).size,
      sourceMapBytes: statSync(`${outfile}.map`).size,
      byPackage,
      jobModule: {
        path: JOB_MODULE,
        ownBytes: own.reduce((sum, p) => sum + p.bytes, 0),
        own,
        sharedWithLeaseq,
      },
      tracingAtInit,
      initMs: spread(runs.worker.wall),
      initCpuMs: spread(runs.worker.cpu),
      leaseqOnly: {
        bundleBytes: statSync(bareOutfile).size,
        wall: spread(runs.bare.wall),
        cpu: spread(runs.bare.cpu),
      },
      targetInitMs: 150,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The lines the benchmark prints. */
export function coldStartText(c: ColdStart): string {
  const kb = (n: number) => `${(n / 1024).toFixed(0)} KiB`;
  const ms = (s: Spread) => `${s.median.toFixed(0)} ms median, ${s.min.toFixed(0)} min`;
  const list = (parts: readonly { name: string; bytes: number }[], n = 8) => {
    const shown = parts.filter((p) => p.bytes >= 512).slice(0, n);
    return shown.length === 0 ? 'nothing' : shown.map((p) => `${p.name} ${kb(p.bytes)}`).join(', ');
  };
  const leaseqBytes = c.bundleBytes - c.jobModule.ownBytes;
  return [
    `Cold start (${c.entry}, bundled as the construct does; ${c.initMs.n} fresh processes per bundle, ` +
      'interleaved, with --enable-source-maps as the construct sets):',
    `  bundle ${kb(c.bundleBytes)} (+ source map ${kb(c.sourceMapBytes)}); by package: ${list(c.byPackage, 10)}`,
    `  init ${ms(c.initMs)} (max ${c.initMs.max.toFixed(0)}); CPU ${ms(c.initCpuMs)}; ` +
      `target <= ${c.targetInitMs} ms: ${c.initMs.median <= c.targetInitMs ? 'met' : 'missed'} on this machine ` +
      "(on Lambda's CPU share it differs)",
    `  leaseq vs the job module (${c.jobModule.path}): leaseq's worker with no jobs is ${kb(c.leaseqOnly.bundleBytes)}, ` +
      `init ${ms(c.leaseqOnly.wall)}, CPU ${ms(c.leaseqOnly.cpu)}; the job module adds ` +
      `${kb(c.jobModule.ownBytes)} of its own (${list(c.jobModule.own, 4)}) and ` +
      `${(c.initMs.median - c.leaseqOnly.wall.median).toFixed(0)} ms wall / ` +
      `${(c.initCpuMs.median - c.leaseqOnly.cpu.median).toFixed(0)} ms CPU at the median` +
      (c.jobModule.sharedWithLeaseq.length > 0
        ? `; it also uses ${list(c.jobModule.sharedWithLeaseq, 4)}, which leaseq bundles anyway`
        : '') +
      ` (leaseq's side of the bundle: ${kb(leaseqBytes)})`,
    `  tracing evaluated at init without OTEL_* set: ${c.tracingAtInit.length === 0 ? 'nothing' : c.tracingAtInit.join(', ')}`,
  ].join('\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const c = await coldStart(Number(process.argv[2] ?? 15));
  process.stdout.write(`${coldStartText(c)}\n`);
}
