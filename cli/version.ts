import { readFileSync } from 'node:fs';

/** The version in leaseq's package.json (cli/ in a checkout, dist/cli/ in the installed package). */
export function packageVersion(): string {
  for (const relative of ['../package.json', '../../package.json']) {
    try {
      const manifest = JSON.parse(readFileSync(new URL(relative, import.meta.url), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (manifest.name === 'leaseq' && manifest.version) return manifest.version;
    } catch {
      // not this one; try the next level up
    }
  }
  return 'unknown';
}
