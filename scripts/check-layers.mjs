// `npm run check:layers`: the import graph of the source has no circle (type-only imports count too)
// and no import from a lower layer to a higher one. Dependency-free: it reads the files, finds the
// relative import/export specifiers (`import`, `import type`, `export ... from`, literal `import('...')`),
// resolves them to files and ignores package imports.
//
//   node scripts/check-layers.mjs [--root <dir>] [--json]
//
// Prints each violation on its own line (importer -> imported, then the rule) and exits 1, or prints a
// one-line summary and exits 0. `--root` checks another tree laid out like this one (the unit test's
// synthetic trees); the default is the repository this script is in. `--json` prints the counts and the
// violations as one JSON object instead (same exit code).
import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The folders checked. test/, bench/ and chaos/ may reach into anything and are not checked. */
export const SOURCE_ROOTS = ['shared', 'cli', 'infra', 'functions', 'bin', 'scripts', 'examples'];

/**
 * The layers, lowest first. A file may import its own layer or a lower one, never a higher one. An entry
 * ending in `/` is a folder and ranks everything below it unless a deeper entry matches: the longest
 * matching prefix wins. Why this order:
 * - errors on the ground floor: every layer throws leaseq's errors, so they depend on nothing;
 * - then the resource names and the AWS clients, the few facts about the outside world all layers share;
 * - the core, inside out: the contract (envelope, items, the store and queue ports), the pure decisions
 *   over it, observation (logs, metrics, spans), leases, then the authoring model (tables, job context,
 *   job definitions) built on all of those; the protocol (one file per edge of the state machine: its
 *   requests and the reading of their answers) is pure: `packages` lists the only packages a layer may
 *   import values from (types from any), so no SDK client and no I/O; the adapters are the only code
 *   touching a store (DynamoDB, SQS): they send what the protocol builds and implement the ports, and the
 *   pipeline (the processor) drives the model through them;
 * - the engine never depends on its authoring layer: shared/jobs (defineJob, job modules) sits above the
 *   pipeline, and what runs jobs (Lambda worker, producer, in-memory test stores, then the local runner
 *   and the operator tools) sits above that;
 * - the ledger example's job module (examples/ledger/, not its demo) is an application of the library;
 *   the reference stack in infra/ runs it by default, so it sits just below infra;
 * - infra/ (the CDK constructs) deploys the engine, and shared/local provisions the local emulator by
 *   synthesizing infra's stack (shared/local/provision.ts imports infra/leaseq-stack.ts), so shared/local
 *   is above infra, not below;
 * - the programs (CLI, Lambda entry, bin, scripts, examples) are at the top and may use everything.
 */
export const LAYERS = [
  { rank: 0, name: 'errors', paths: ['shared/errors.ts', 'shared/error-text.ts'] },
  {
    rank: 1,
    name: 'outside world',
    paths: ['shared/resources.ts', 'shared/sibling-module.ts', 'shared/optional-package.ts', 'shared/aws/'],
  },
  { rank: 2, name: 'contract', paths: ['shared/core/contract/'] },
  { rank: 3, name: 'decisions', paths: ['shared/core/decisions/'] },
  { rank: 4, name: 'observe', paths: ['shared/core/observe/'] },
  { rank: 5, name: 'leases', paths: ['shared/core/leases/'] },
  { rank: 6, name: 'model', paths: ['shared/core/model/'] },
  { rank: 7, name: 'protocol', paths: ['shared/core/protocol/'], packages: ['@aws-sdk/util-dynamodb'] },
  { rank: 8, name: 'adapters', paths: ['shared/core/adapters/'] },
  { rank: 9, name: 'pipeline', paths: ['shared/core/pipeline/'] },
  { rank: 10, name: 'jobs', paths: ['shared/jobs/'] },
  {
    rank: 11,
    name: 'worker, producer, testing',
    paths: ['shared/worker/', 'shared/producer/', 'shared/testing/'],
  },
  { rank: 12, name: 'runner', paths: ['shared/runner/'] },
  { rank: 13, name: 'ops', paths: ['shared/ops/'] },
  { rank: 14, name: 'example jobs', paths: ['examples/ledger/'] },
  { rank: 15, name: 'infra', paths: ['infra/'] },
  { rank: 16, name: 'local', paths: ['shared/local/'] },
  { rank: 17, name: 'entry points', paths: ['shared/index.ts'] },
  {
    rank: 18,
    name: 'programs',
    paths: ['cli/', 'functions/', 'bin/', 'scripts/', 'examples/', 'examples/ledger/demo/'],
  },
];

/**
 * Every `index.ts` is a package entry point (`leaseq`, `leaseq/producer`, `leaseq/testing`, `leaseq/cdk`):
 * it may import anything, and only another index.ts or a program (layer >= ENTRY_CLIENTS) may import
 * it, so internal code never goes through the public surface.
 */
export const ENTRY_FILE = 'index.ts';
export const ENTRY_CLIENTS = 18;

const CODE = /\.(?:[cm]?ts|tsx|[cm]?js)$/;
const SKIP_DIRS = new Set(['node_modules', 'dist', 'cdk.out', '.leaseq', 'coverage']);

/** The layer of a repository-relative path (`/` separators): the longest matching entry, or undefined. */
export function layerOf(path) {
  let best;
  let bestLength = -1;
  for (const layer of LAYERS) {
    for (const entry of layer.paths) {
      const matches = entry.endsWith('/') ? path.startsWith(entry) : path === entry;
      if (matches && entry.length > bestLength) {
        best = layer;
        bestLength = entry.length;
      }
    }
  }
  return best;
}

const isEntry = (path) => path === ENTRY_FILE || path.endsWith(`/${ENTRY_FILE}`);

// --- finding the specifiers -------------------------------------------------------------------------

const REGEX_AFTER_WORD = new Set(
  'return typeof instanceof in of new delete void throw case do else yield await'.split(' '),
);

/**
 * A small tokenizer, enough to tell code from comments, strings, template literals and regular
 * expressions: tokens are `{ type, value }`, type 'word', 'punct' (one character), 'string', 'regex' or
 * 'template' (the text of a template literal before a substitution, which is tokenized as code). A
 * template literal without substitution is a 'string', so a literal import(`./x.ts`) is found too.
 */
export function tokenize(text) {
  const tokens = [];
  const braces = []; // 'brace' for `{`, 'template' for `${`
  let i = 0;
  const match = (pattern) => {
    pattern.lastIndex = i;
    const found = pattern.exec(text);
    return found ? found[0] : '';
  };
  const regexAllowed = () => {
    const last = tokens[tokens.length - 1];
    if (!last) return true;
    if (last.type === 'word') return REGEX_AFTER_WORD.has(last.value);
    if (last.type !== 'punct') return false;
    return last.value !== ')' && last.value !== ']' && last.value !== '}';
  };
  // Reads a template literal's text from i (just after '`' or a substitution's '}').
  const template = () => {
    const value = match(TEMPLATE_TEXT);
    i += value.length;
    if (text.startsWith('${', i)) {
      i += 2;
      braces.push('template');
      tokens.push({ type: 'template', value });
    } else {
      i += 1; // the closing '`'
      tokens.push({ type: 'string', value: unescaped(value) });
    }
  };
  while (i < text.length) {
    const c = text[i];
    const next = text[i + 1];
    if (c === ' ' || c === '\n' || c === '\t' || c === '\r') {
      i += 1;
    } else if (c === '/' && next === '/') {
      const end = text.indexOf('\n', i);
      i = end === -1 ? text.length : end;
    } else if (c === '/' && next === '*') {
      const end = text.indexOf('*/', i + 2);
      i = end === -1 ? text.length : end + 2;
    } else if (c === "'" || c === '"') {
      const raw = match(c === "'" ? SINGLE_QUOTED : DOUBLE_QUOTED);
      i += raw.length;
      tokens.push({ type: 'string', value: unescaped(raw.slice(1, raw.endsWith(c) ? -1 : undefined)) });
    } else if (c === '`') {
      i += 1;
      template();
    } else if (c === '/' && regexAllowed()) {
      i += match(REGEX_LITERAL).length;
      tokens.push({ type: 'regex', value: '' });
    } else if (c === '{') {
      braces.push('brace');
      tokens.push({ type: 'punct', value: c });
      i += 1;
    } else if (c === '}') {
      i += 1;
      if (braces.pop() === 'template') template();
      else tokens.push({ type: 'punct', value: c });
    } else {
      const word = match(WORD);
      if (word) {
        tokens.push({ type: 'word', value: word });
        i += word.length;
      } else {
        if (!/\s/.test(c)) tokens.push({ type: 'punct', value: c });
        i += 1;
      }
    }
  }
  return tokens;
}

const WORD = /[\p{L}\p{N}_$]+/uy;
const SINGLE_QUOTED = /'(?:[^'\\\n]|\\[\s\S])*'?/y;
const DOUBLE_QUOTED = /"(?:[^"\\\n]|\\[\s\S])*"?/y;
const TEMPLATE_TEXT = /(?:[^`\\$]|\\[\s\S]|\$(?!\{))*/y;
const REGEX_LITERAL = /\/(?:[^\\/[\n]|\\.|\[(?:[^\]\\\n]|\\.)*\]?)*\/?[a-z]*/y;
const unescaped = (raw) => raw.replace(/\\([\s\S])/g, '$1');

/**
 * The module specifiers a file imports: static imports and re-exports (type-only ones included), side
 * effect imports and dynamic `import()` of a literal. Each is `{ specifier, kind, typeOnly }`.
 */
export function findSpecifiers(text) {
  const tokens = tokenize(text);
  const found = [];
  const at = (k) => tokens[k] ?? { type: 'eof', value: '' };
  for (let k = 0; k < tokens.length; k += 1) {
    const token = tokens[k];
    if (token.type !== 'word' || (token.value !== 'import' && token.value !== 'export')) continue;
    if (at(k - 1).value === '.') continue; // x.import, x.export
    const next = at(k + 1);
    if (token.value === 'import' && next.value === '(') {
      const argument = at(k + 2);
      const close = at(k + 3);
      if (argument.type === 'string' && (close.value === ')' || close.value === ',')) {
        found.push({ specifier: argument.value, kind: 'dynamic import' });
      }
      continue;
    }
    if (token.value === 'import' && next.value === '.') continue; // import.meta
    if (token.value === 'import' && next.type === 'string') {
      found.push({ specifier: next.value, kind: 'import' });
      continue;
    }
    // `import ... from '...'` / `export {...} from '...'` / `export * (as x) from '...'`: the clause is
    // words, commas, `*` and braces; `from` then a string ends it. Anything else (`export const`, `=`)
    // means this is not an import or re-export.
    if (token.value === 'export' && !['{', '*', 'type'].includes(next.value)) continue;
    const typeOnly = next.value === 'type' && at(k + 2).value !== 'from' && at(k + 2).value !== ',';
    let depth = 0;
    for (let m = k + 1; m < tokens.length; m += 1) {
      const t = tokens[m];
      if (t.value === '{' && t.type === 'punct') depth += 1;
      else if (t.value === '}' && t.type === 'punct') depth -= 1;
      else if (depth > 0) {
        if (t.type === 'punct' && t.value !== ',') break; // not a clause after all
      } else if (t.type === 'word' && t.value === 'from' && at(m + 1).type === 'string') {
        found.push({ specifier: at(m + 1).value, kind: token.value, typeOnly });
        break;
      } else if (t.type !== 'word' && !(t.type === 'punct' && (t.value === ',' || t.value === '*'))) {
        break;
      }
      if (depth < 0) break;
    }
  }
  return found;
}

// --- the graph ------------------------------------------------------------------------------------

const toPosix = (path) => path.split(sep).join('/');

function listFiles(root) {
  const files = [];
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (SKIP_DIRS.has(entry.name)) continue;
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile() && CODE.test(entry.name) && !entry.name.endsWith('.d.ts')) files.push(path);
    }
  };
  for (const folder of SOURCE_ROOTS) {
    const dir = join(root, folder);
    if (existsSync(dir) && statSync(dir).isDirectory()) walk(dir);
  }
  return files.sort();
}

const isFile = (path) => existsSync(path) && statSync(path).isFile();

/** The file a relative specifier names, as the TypeScript sources write them (`./x.ts`, `./x.js`, `./x`). */
function resolveSpecifier(fromFile, specifier) {
  const base = resolve(dirname(fromFile), specifier);
  const candidates = [base];
  const swapped = base.replace(/\.([cm]?)js$/, '.$1ts');
  if (swapped !== base) candidates.push(swapped);
  for (const ext of ['.ts', '.tsx', '.mts', '.cts', '.mjs', '.js', '.cjs']) candidates.push(base + ext);
  for (const index of ['index.ts', 'index.mjs', 'index.js']) candidates.push(join(base, index));
  return candidates.find(isFile);
}

/** The shortest path of edges from `from` to `to` inside one strongly connected component. */
function shortestPath(edges, component, from, to) {
  const back = new Map([[from, null]]);
  const queue = [from];
  while (queue.length > 0) {
    const node = queue.shift();
    if (node === to) break;
    for (const target of edges.get(node) ?? []) {
      if (component.has(target) && !back.has(target)) {
        back.set(target, node);
        queue.push(target);
      }
    }
  }
  const path = [to];
  for (let node = back.get(to); node !== null && node !== undefined; node = back.get(node)) {
    path.unshift(node);
  }
  return path;
}

/** Strongly connected components (Tarjan, iterative), each as a Set of nodes. */
function components(nodes, edges) {
  const index = new Map();
  const low = new Map();
  const onStack = new Set();
  const stack = [];
  const result = [];
  let counter = 0;
  for (const start of nodes) {
    if (index.has(start)) continue;
    const work = [{ node: start, targets: [...(edges.get(start) ?? [])], next: 0 }];
    index.set(start, counter);
    low.set(start, counter);
    counter += 1;
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const frame = work[work.length - 1];
      if (frame.next < frame.targets.length) {
        const target = frame.targets[frame.next];
        frame.next += 1;
        if (!index.has(target)) {
          index.set(target, counter);
          low.set(target, counter);
          counter += 1;
          stack.push(target);
          onStack.add(target);
          work.push({ node: target, targets: [...(edges.get(target) ?? [])], next: 0 });
        } else if (onStack.has(target)) {
          low.set(frame.node, Math.min(low.get(frame.node), index.get(target)));
        }
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent) low.set(parent.node, Math.min(low.get(parent.node), low.get(frame.node)));
      if (low.get(frame.node) === index.get(frame.node)) {
        const component = new Set();
        let member;
        do {
          member = stack.pop();
          onStack.delete(member);
          component.add(member);
        } while (member !== frame.node);
        result.push(component);
      }
    }
  }
  return result;
}

/**
 * Checks the tree at `root`. Returns the counts and the violations, each
 * `{ rule, from, to, message }` with repository-relative paths.
 */
export function checkLayers(root) {
  const files = listFiles(root);
  const rel = (path) => toPosix(relative(root, path));
  const inGraph = new Set(files.map(rel));
  const edges = new Map(); // importer -> Set of imported (repository-relative)
  const violations = [];
  let imports = 0;

  for (const file of files) {
    const from = rel(file);
    const targets = new Set();
    edges.set(from, targets);
    if (!layerOf(from) && !isEntry(from)) {
      violations.push({ rule: 'unranked', from, to: '', message: 'no layer in the table for this file' });
    }
    const pure = layerOf(from)?.packages;
    for (const { specifier, typeOnly } of findSpecifiers(readFileSync(file, 'utf8'))) {
      if (!specifier.startsWith('./') && !specifier.startsWith('../')) {
        if (pure && !typeOnly && !pure.includes(specifier)) {
          const { rank, name } = layerOf(from);
          const message = `layer ${rank} (${name}) is pure: values only from ${pure.join(', ')} (types from any package)`;
          violations.push({ rule: 'impure', from, to: specifier, message });
        }
        continue; // a package
      }
      const resolved = resolveSpecifier(file, specifier);
      if (!resolved) {
        violations.push({ rule: 'unresolved', from, to: specifier, message: 'no such file' });
        continue;
      }
      const to = rel(resolved);
      if (!CODE.test(to)) continue; // JSON and other assets are not part of the graph
      imports += 1;
      if (!inGraph.has(to)) {
        violations.push({ rule: 'outside', from, to, message: 'imports code outside the checked folders' });
        continue;
      }
      targets.add(to);
    }
  }

  // (b) no import from a lower layer to a higher one; entry points only from entry points and programs.
  for (const [from, targets] of edges) {
    const fromLayer = layerOf(from);
    for (const to of targets) {
      const toLayer = layerOf(to);
      if (isEntry(to) && !isEntry(from)) {
        if (!fromLayer || fromLayer.rank < ENTRY_CLIENTS) {
          const where = fromLayer ? `layer ${fromLayer.rank} (${fromLayer.name})` : 'an unranked file';
          const message = `entry point ${to} imported by ${where}: only another ${ENTRY_FILE} or layer >= ${ENTRY_CLIENTS} may`;
          violations.push({ rule: 'entry point', from, to, message });
        }
        continue;
      }
      if (isEntry(from) || !fromLayer || !toLayer) continue; // unranked files are reported once above
      if (toLayer.rank > fromLayer.rank) {
        const message = `layer ${fromLayer.rank} (${fromLayer.name}) imports layer ${toLayer.rank} (${toLayer.name})`;
        violations.push({ rule: 'upward', from, to, message });
      }
    }
  }

  // (a) no circle: every edge inside a strongly connected component lies on a circle; each is reported
  // with the shortest circle through it.
  for (const component of components([...edges.keys()], edges)) {
    const selfLoop = component.size === 1 && edges.get([...component][0])?.has([...component][0]);
    if (component.size === 1 && !selfLoop) continue;
    for (const from of [...component].sort()) {
      for (const to of [...(edges.get(from) ?? [])].sort()) {
        if (!component.has(to)) continue;
        const circle = [from, ...shortestPath(edges, component, to, from)];
        violations.push({ rule: 'circle', from, to, message: circle.join(' -> ') });
      }
    }
  }

  return { files: files.length, imports, layers: LAYERS.length, violations };
}

export function formatViolation({ rule, from, to, message }) {
  return to ? `${from} -> ${to}  [${rule}] ${message}` : `${from}  [${rule}] ${message}`;
}

function main(args) {
  const started = performance.now();
  const rootFlag = args.indexOf('--root');
  const root =
    rootFlag === -1 ? fileURLToPath(new URL('..', import.meta.url)) : resolve(args[rootFlag + 1] ?? '.');
  const result = checkLayers(root);
  const ms = Math.round(performance.now() - started);
  if (args.includes('--json')) {
    process.stdout.write(`${JSON.stringify({ ...result, ms })}\n`);
    if (result.violations.length > 0) process.exitCode = 1;
    return;
  }
  if (result.violations.length > 0) {
    for (const violation of result.violations) process.stdout.write(`${formatViolation(violation)}\n`);
    process.stderr.write(
      `check-layers: ${result.violations.length} violation(s) in ${result.files} files, ${result.imports} imports, ${result.layers} layers\n`,
    );
    process.exitCode = 1;
    return;
  }
  process.stdout.write(
    `check-layers: ${result.files} files, ${result.imports} imports, ${result.layers} layers: no circle, no upward import (${ms} ms)\n`,
  );
}

// Run as a program (not imported): `node scripts/check-layers.mjs`.
if (process.argv[1] && realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url))) {
  main(process.argv.slice(2));
}
