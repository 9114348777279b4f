// `npm run build`: compiles the library, CLI, construct and examples to dist/ (JavaScript + .d.ts), so
// the installed package runs on plain Node and in the Lambda runtime without tsx.
import { execFileSync } from 'node:child_process';
import { copyFileSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const dist = join(root, 'dist');
rmSync(dist, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });

// tsc rewrites `./x.ts` to `./x.js` in JavaScript, not in declaration files; consumers' compilers
// resolve `./x.js` to the `.d.ts` beside it.
let rewritten = 0;
for (const entry of readdirSync(dist, { recursive: true, withFileTypes: true })) {
  if (!entry.isFile() || !entry.name.endsWith('.d.ts')) continue;
  const file = join(entry.parentPath, entry.name);
  const text = readFileSync(file, 'utf8');
  const fixed = text.replace(/(from\s+|import\()(['"])(\.{1,2}\/[^'"]+)\.ts\2/g, '$1$2$3.js$2');
  if (fixed !== text) {
    writeFileSync(file, fixed);
    rewritten += 1;
  }
}
// The reference stack reads cdk.json's feature flags when it is synthesized in-process (local provisioning).
copyFileSync(join(root, 'cdk.json'), join(dist, 'cdk.json'));
process.stderr.write(`built dist/ (${rewritten} declaration files rewritten)\n`);
