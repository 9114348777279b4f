#!/usr/bin/env node
// The `leaseq` command. In a source checkout it runs the TypeScript CLI through tsx (no build step); in
// the installed package it runs the compiled CLI. tsx is registered either way, so a job module written
// in TypeScript (`--job-module src/jobs.ts`) loads without a build of your own.
import { existsSync } from 'node:fs';
import { register as registerCommonJs } from 'tsx/cjs/api';
import { register } from 'tsx/esm/api';

// Both hooks: a `.ts` file is CommonJS in a project without `"type": "module"` (what `cdk init` makes).
register();
registerCommonJs();
const source = new URL('../cli/main.ts', import.meta.url);
await import(existsSync(source) ? source.href : new URL('../dist/cli/main.js', import.meta.url).href);
