#!/usr/bin/env node
// Runs the TypeScript CLI directly through tsx: no build step, so `npx leaseq` always runs the source.
import { register } from 'tsx/esm/api';

register();
await import('../cli/main.ts');
