import { createRequire } from 'node:module';
import { ConfigError } from './errors.ts';

/**
 * Packages leaseq uses for some commands only, declared as optional peers so that installing leaseq for
 * its producer or its Lambda handler pulls no build tools: tsx (TypeScript job modules in the CLI and
 * local workers), esbuild (the construct bundles the worker), the CloudFormation client (deploys to the
 * emulator). What each one is needed for is said in the error when it is missing.
 */
export const OPTIONAL_PACKAGES = {
  tsx: 'loading a TypeScript job module (or compile it to JavaScript first)',
  esbuild: 'bundling the worker function when a CDK app synthesizes LeaseqPipeline or LeaseqStack',
  '@aws-sdk/client-cloudformation':
    'deploying a stack to the emulator (leaseq local deploy, start --runtime lambda)',
} as const;
export type OptionalPackage = keyof typeof OPTIONAL_PACKAGES;

const require = createRequire(import.meta.url);

/** True when `name` resolves from leaseq's own location (the project's node_modules when installed). */
export function isInstalled(name: OptionalPackage): boolean {
  try {
    require.resolve(name);
    return true;
  } catch {
    return false;
  }
}

/** The one-line instruction for a missing optional package. */
export function missingPackage(name: OptionalPackage, cause?: unknown): ConfigError {
  return new ConfigError(
    `${name} is not installed; it is needed for ${OPTIONAL_PACKAGES[name]}: npm install --save-dev ${name}`,
    cause,
  );
}

/**
 * Imports an optional package, or throws {@link missingPackage}'s ConfigError when it is not installed
 * (an error inside the package itself is rethrown as it is).
 */
export async function loadOptional<T>(name: OptionalPackage): Promise<T> {
  if (!isInstalled(name)) throw missingPackage(name);
  return (await import(name)) as T;
}
