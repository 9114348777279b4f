#!/usr/bin/env node
// The `leaseq` command. In a source checkout it runs the TypeScript CLI through tsx (no build step); in
// the installed package it runs the compiled CLI. When tsx is installed (an optional peer: a producer-only
// install has no build tools) it is registered either way, so a job module written in TypeScript
// (`--job-module src/jobs.ts`) loads without a build of your own.
import { existsSync } from 'node:fs';

const source = new URL('../cli/main.ts', import.meta.url);
const fromSource = existsSync(source);
try {
  const [esm, cjs] = await Promise.all([import('tsx/esm/api'), import('tsx/cjs/api')]);
  // Both hooks: a `.ts` file is CommonJS in a project without `"type": "module"` (what `cdk init` makes).
  esm.register();
  cjs.register();
} catch (error) {
  // Without tsx the compiled CLI runs JavaScript job modules; the sources cannot run at all.
  if (fromSource || error?.code !== 'ERR_MODULE_NOT_FOUND') throw error;
}
await import(fromSource ? source.href : new URL('../dist/cli/main.js', import.meta.url).href);
