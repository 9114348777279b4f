// Cold start of the worker Lambda's bundle: built the way the construct builds it (infra/constructs/
// worker-function.ts: local esbuild, ESM, node22, minified, the S3 client left out without large
// payloads), its size by package from esbuild's metafile, and its init time: a fresh Node process
// importing the bundle and building the handler, as Lambda's init phase does. Figures only, never
// asserted. `tsx bench/cold-start.ts` prints them; the side-by-side benchmark calls coldStart().
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { workerExternalModules } from '../infra/constructs/worker-function.ts';
import { WORKER_ENV } from '../shared/resources.ts';
import { spread } from './report.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

/** What the cold-start measurement found. */
export interface ColdStart {
  readonly entry: string;
  readonly bundleBytes: number;
  /** Bytes of the bundle's output by package (`leaseq` for this repository's own code), largest first. */
  readonly byPackage: readonly { readonly name: string; readonly bytes: number }[];
  /** Packages evaluated at init that only tracing needs (none is the target). */
  readonly tracingAtInit: readonly string[];
  /** Init (import + handler built) in a fresh process, ms: median, min, max over the samples. */
  readonly initMs: {
    readonly median: number;
    readonly min: number;
    readonly max: number;
    readonly n: number;
  };
  /** The target the issue sets. */
  readonly targetInitMs: number;
}

function packageOf(input: string): string {
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(input);
  return m?.[1] ?? 'leaseq';
}

/** Builds functions/worker.ts as the construct does and times its init `samples` times. */
export async function coldStart(samples = 5): Promise<ColdStart> {
  const dir = mkdtempSync(join(tmpdir(), 'leaseq-cold-'));
  try {
    const outfile = join(dir, 'index.mjs');
    const result = await build({
      entryPoints: [join(ROOT, 'functions/worker.ts')],
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
      metafile: true,
      outfile,
      logLevel: 'silent',
    });
    const byName = new Map<string, number>();
    for (const output of Object.values(result.metafile.outputs)) {
      for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
        const name = packageOf(input);
        byName.set(name, (byName.get(name) ?? 0) + bytesInOutput);
      }
    }
    const byPackage = [...byName].map(([name, bytes]) => ({ name, bytes })).sort((a, b) => b.bytes - a.bytes);
    // The init a Lambda runs: import the bundle (its top level builds the handler from the environment).
    const probe = join(dir, 'probe.mjs');
    writeFileSync(
      probe,
      [
        'const t0 = performance.now();',
        `await import(${JSON.stringify(outfile)});`,
        'const ms = performance.now() - t0;',
        'console.log(JSON.stringify({ ms }));',
      ].join('\n'),
    );
    const env = {
      PATH: process.env.PATH ?? '',
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
    const times: number[] = [];
    for (let i = 0; i < samples; i++) {
      const out = execFileSync(process.execPath, [probe], { env, encoding: 'utf8' });
      const line = JSON.parse(out.trim().split('\n').pop() ?? '{}') as { ms: number };
      times.push(line.ms);
    }
    const s = spread(times);
    // Modules evaluated at init: those the entry reaches by static imports (a dynamic import is evaluated
    // when it runs). Of those, the tracing SDK's packages are what a worker without tracing never uses
    // (@opentelemetry/api stays: leaseq's spans call its no-op tracer).
    const inputs = result.metafile.inputs;
    const reached = new Set<string>();
    const stack = Object.keys(inputs).filter((k) => k.endsWith('functions/worker.ts'));
    while (stack.length > 0) {
      const next = stack.pop() as string;
      if (reached.has(next)) continue;
      reached.add(next);
      for (const imp of inputs[next]?.imports ?? []) {
        if (imp.kind !== 'dynamic-import' && !imp.external && inputs[imp.path]) stack.push(imp.path);
      }
    }
    const tracingAtInit = [...new Set([...reached].map(packageOf))]
      .filter((name) => name.startsWith('@opentelemetry/') && name !== '@opentelemetry/api')
      .sort();
    return {
      entry: 'functions/worker.ts',
      bundleBytes: statSync(outfile).size,
      byPackage,
      tracingAtInit,
      initMs: { median: s.median, min: s.min, max: s.max, n: times.length },
      targetInitMs: 150,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The lines the benchmark prints. */
export function coldStartText(c: ColdStart): string {
  const kb = (n: number) => `${(n / 1024).toFixed(0)} KiB`;
  const top = c.byPackage
    .slice(0, 8)
    .map((p) => `${p.name} ${kb(p.bytes)}`)
    .join(', ');
  return [
    `Cold start (${c.entry}, bundled as the construct does): bundle ${kb(c.bundleBytes)}; init ` +
      `${c.initMs.median.toFixed(0)} ms median (${c.initMs.min.toFixed(0)}-${c.initMs.max.toFixed(0)}, ${c.initMs.n} fresh ` +
      `processes on this machine; target <= ${c.targetInitMs} ms, on Lambda's CPU share it differs)`,
    `  largest parts: ${top}`,
    `  tracing evaluated at init without OTEL_* set: ${c.tracingAtInit.length === 0 ? 'nothing' : c.tracingAtInit.join(', ')}`,
  ].join('\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const c = await coldStart(Number(process.argv[2] ?? 5));
  process.stdout.write(`${coldStartText(c)}\n`);
}
