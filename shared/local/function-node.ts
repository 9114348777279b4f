/**
 * Which Node the embedded emulator runs deployed functions on. MiniStack starts a `nodejs*` function as
 * `node _worker.js`, `node` found on its own PATH, whatever runtime the function declares: leaseq puts
 * one Node first on that PATH and records it, and a deploy says when a function declares another major.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The Node the emulator runs functions on, as `.leaseq/emulator.json` records it. */
export interface FunctionNode {
  readonly path: string;
  /** `process.version` of that binary, e.g. `v22.23.3`. */
  readonly version: string;
}

/**
 * The project's own Node (`node_modules/.bin/node`, the `node` dev dependency leaseq's functions are
 * built for) in the first of `projectDirs` that has one that runs, else `fallback` (the Node running
 * leaseq).
 */
export function chooseFunctionNode(
  projectDirs: readonly string[],
  fallback: string = process.execPath,
): FunctionNode {
  for (const dir of projectDirs) {
    const candidate = join(dir, 'node_modules', '.bin', 'node');
    const version = existsSync(candidate) ? nodeVersion(candidate) : undefined;
    if (version) return { path: candidate, version };
  }
  return {
    path: fallback,
    version: fallback === process.execPath ? process.version : (nodeVersion(fallback) ?? 'unknown'),
  };
}

/** `binary --version`, or `undefined` when it does not run. */
export function nodeVersion(binary: string): string | undefined {
  try {
    const out = execFileSync(binary, ['--version'], { encoding: 'utf8', timeout: 10_000 }).trim();
    return /^v\d+\./.test(out) ? out : undefined;
  } catch {
    return undefined;
  }
}

/** The Node functions (`Runtime: nodejsNN.x`) of CloudFormation templates, by logical id. */
export function nodeRuntimes(templateFiles: readonly string[]): { id: string; runtime: string }[] {
  const found: { id: string; runtime: string }[] = [];
  for (const file of templateFiles) {
    let template: { Resources?: Record<string, { Type?: string; Properties?: { Runtime?: unknown } }> };
    try {
      template = JSON.parse(readFileSync(file, 'utf8'));
    } catch {
      continue;
    }
    for (const [id, resource] of Object.entries(template.Resources ?? {})) {
      const runtime = resource.Properties?.Runtime;
      if (
        resource.Type === 'AWS::Lambda::Function' &&
        typeof runtime === 'string' &&
        runtime.startsWith('nodejs')
      )
        found.push({ id, runtime });
    }
  }
  return found;
}

/**
 * One line when a function declares a Node major other than the one the emulator runs it on
 * (`undefined` when all match): the emulator has one Node for every function.
 */
export function runtimeMismatch(
  functions: readonly { id: string; runtime: string }[],
  node: FunctionNode,
): string | undefined {
  const major = /^v(\d+)\./.exec(node.version)?.[1];
  const other = functions.filter((f) => /^nodejs(\d+)/.exec(f.runtime)?.[1] !== major);
  if (other.length === 0) return undefined;
  const declared = [...new Set(other.map((f) => f.runtime))].join(', ');
  const wanted = /^nodejs(\d+)/.exec(other[0]?.runtime ?? '')?.[1] ?? '';
  const head = `warning: ${other.map((f) => f.id).join(', ')} declare${other.length === 1 ? 's' : ''} ${declared}, but the emulator runs functions on Node ${node.version} (${node.path})`;
  // Functions of several majors (a CDK handler declares the latest Node): installing one moves the others.
  const majors = [...new Set(functions.map((f) => f.runtime))].sort();
  if (majors.length > 1)
    return `${head}: it runs every function on that one Node, and the functions declare several majors (${majors.join(', ')})`;
  return `${head}: install Node ${wanted} in the project (npm install --save-dev node@${wanted}) and restart the emulator (leaseq local down, then leaseq local up)`;
}
