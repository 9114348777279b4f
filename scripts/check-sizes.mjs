// `npm run check:sizes`: no source file grows past LIMIT lines. A unit of work should fit on a screen or
// two; a file that passes the limit is split by role (one file per edge, a route per file), not grown.
// The few files that were already longer when the rule came in are listed in CEILINGS with the size they
// had: they may shrink, never grow, and an entry whose file is back under the limit (or gone) is reported
// as stale so the list only gets shorter. The library (`shared/`) is held to the limit with no exception:
// CEILINGS may not list a file under shared/.
//
//   node scripts/check-sizes.mjs [--root <dir>] [--json]
//
// Prints each violation on its own line and exits 1, or prints a one-line summary and exits 0.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The folders checked (as check-layers.mjs); tests, the benchmark and chaos are not. */
export const SOURCE_ROOTS = ['shared', 'cli', 'infra', 'functions', 'bin', 'scripts', 'examples'];

/** Lines a source file may have. */
export const LIMIT = 400;

/** Files held to a tighter limit than LIMIT: the processor is the unit of work a reader follows top to bottom. */
export const FILE_LIMITS = { 'shared/core/pipeline/processor.ts': 300 };

/**
 * Files longer than their limit when the rule came in (2026-12-03; LIMIT went from 450 to 400 the same day), each at the size it had then: a ratchet.
 * Split one and lower (or remove) its entry in the same commit.
 */
export const CEILINGS = {
  'examples/ledger/demo/run-demo.ts': 404,
  'infra/leaseq-pipeline.ts': 566,
  'scripts/check-layers.mjs': 467,
};

/** The folder whose files CEILINGS may not list: the library is held to the limit with no exception. */
const LIBRARY = 'shared/';

const CODE = /\.(?:[cm]?ts|tsx|[cm]?js)$/;
const SKIP_DIRS = new Set(['node_modules', 'dist', 'cdk.out', '.leaseq', 'coverage']);

function* sourceFiles(root) {
  for (const top of SOURCE_ROOTS) {
    const start = join(root, top);
    if (!existsSync(start)) continue;
    const stack = [start];
    while (stack.length > 0) {
      const dir = stack.pop();
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        const stat = statSync(path);
        if (stat.isDirectory()) {
          if (!SKIP_DIRS.has(name)) stack.push(path);
        } else if (CODE.test(name) && !name.endsWith('.d.ts')) {
          yield relative(root, path).split(sep).join('/');
        }
      }
    }
  }
}

const lineCount = (text) => (text === '' ? 0 : text.split('\n').length - (text.endsWith('\n') ? 1 : 0));

/**
 * Checks a tree; `ceilings` defaults to CEILINGS (the synthetic trees of the unit test pass their own).
 */
export function checkSizes(root, ceilings = CEILINGS) {
  const violations = [];
  for (const path of Object.keys(ceilings)) {
    if (path.startsWith(LIBRARY)) {
      violations.push({
        rule: 'library-ceiling',
        path,
        lines: 0,
        message: `${path}: listed in CEILINGS, but no file of ${LIBRARY} may pass the limit: split it and remove its entry`,
      });
    }
  }
  const seen = new Set();
  let files = 0;
  for (const path of sourceFiles(root)) {
    files += 1;
    const lines = lineCount(readFileSync(join(root, path), 'utf8'));
    const limit = FILE_LIMITS[path] ?? LIMIT;
    const ceiling = ceilings[path];
    if (ceiling !== undefined) {
      seen.add(path);
      if (lines > ceiling) {
        violations.push({
          rule: 'grown',
          path,
          lines,
          message: `${path}: ${lines} lines, over its ceiling of ${ceiling} (it was already past ${limit}: split it, do not grow it)`,
        });
      } else if (lines <= limit) {
        violations.push({
          rule: 'stale-ceiling',
          path,
          lines,
          message: `${path}: ${lines} lines, back under ${limit}: remove its entry from CEILINGS in scripts/check-sizes.mjs`,
        });
      }
    } else if (lines > limit) {
      violations.push({
        rule: 'too-long',
        path,
        lines,
        message: `${path}: ${lines} lines, over the limit of ${limit}: split it by role`,
      });
    }
  }
  for (const path of Object.keys(ceilings)) {
    if (!seen.has(path)) {
      violations.push({
        rule: 'stale-ceiling',
        path,
        lines: 0,
        message: `${path}: listed in CEILINGS but not found: remove its entry from scripts/check-sizes.mjs`,
      });
    }
  }
  return { files, limit: LIMIT, ceilings, violations };
}

function main(argv) {
  const rootIndex = argv.indexOf('--root');
  const root =
    rootIndex >= 0
      ? resolve(argv[rootIndex + 1] ?? '.')
      : resolve(dirname(fileURLToPath(import.meta.url)), '..');
  // A synthetic tree brings its own ceilings (a JSON file at its root), so the repository's list does not
  // apply.
  const own = (file, none) => {
    const path = join(root, file);
    return existsSync(path) ? JSON.parse(readFileSync(path, 'utf8')) : none;
  };
  const report = rootIndex >= 0 ? checkSizes(root, own('size-ceilings.json', {})) : checkSizes(root);
  if (argv.includes('--json')) {
    process.stdout.write(`${JSON.stringify(report)}\n`);
  } else if (report.violations.length > 0) {
    for (const v of report.violations) process.stdout.write(`${v.message}\n`);
  } else {
    process.stdout.write(
      `check-sizes: ${report.files} files, none over ${LIMIT} lines (${Object.keys(report.ceilings).length} older files held at their size)\n`,
    );
  }
  process.exitCode = report.violations.length > 0 ? 1 : 0;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url))
  main(process.argv.slice(2));
