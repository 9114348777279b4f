import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * Path of the module `name` next to `from` (an `import.meta.url`): `name.ts` in a source checkout, where
 * tsx runs the sources, `name.js` in the built package. For entry points handed to `fork`/`spawn`,
 * which the compiler's import rewriting does not see.
 */
export function siblingModule(from: string, name: string): string {
  const ts = fileURLToPath(new URL(`./${name}.ts`, from));
  return existsSync(ts) ? ts : fileURLToPath(new URL(`./${name}.js`, from));
}
