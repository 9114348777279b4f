import type { TestProject } from 'vitest/node';
import { acquireEmulator } from '../../shared/local/emulator.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Endpoint for every AWS client in integration tests. */
    endpoint: string;
    /** What answers there: `ministack 1.5.33`, or `external` for AWS_ENDPOINT_URL. */
    emulator: string;
  }
}

/**
 * Global setup of the integration project: uses AWS_ENDPOINT_URL when it is set (LocalStack, any
 * emulator), else the embedded emulator (installed on first use, reused when already running). The
 * teardown stops the emulator only if a test session started it, and only when the last of the
 * sessions sharing it (concurrent `vitest` runs in this checkout) is done; one started with
 * `leaseq local up` (as .ci/run does) keeps running.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const previous = process.env.AWS_ENDPOINT_URL;
  const handle = await acquireEmulator({ log: (line) => process.stderr.write(`[leaseq] ${line}\n`) });
  project.provide('endpoint', handle.endpoint);
  project.provide(
    'emulator',
    handle.mode === 'external' ? 'external' : `${handle.emulator} ${handle.version}`,
  );
  // Workers are forked after global setup, so code under test that reads the environment finds it too.
  process.env.AWS_ENDPOINT_URL = handle.endpoint;
  // The SDK's notice about its future Node 22 requirement would repeat in every worker's output.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

  return async () => {
    if (previous === undefined) delete process.env.AWS_ENDPOINT_URL;
    else process.env.AWS_ENDPOINT_URL = previous;
    await handle.release();
  };
}
