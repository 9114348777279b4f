import { defineConfig } from 'vitest/config';
import { LongestFirstSequencer } from './test/support/sequencer.ts';

// Projects: `unit` and `model` need nothing running; `integration` talks to the AWS emulator that
// test/support/global-setup.ts starts (or to AWS_ENDPOINT_URL when it is set, e.g. LocalStack).
// The global setup runs in this process and uses the SDK too. `timing` holds the few unit files whose
// real timers measure the event loop itself (a job blocking it): they run alone, after the others.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
// aws-cdk-lib's CloudFormation validation of each synthesized template (a WASM engine) costs about 8.6 s
// of CPU in every process that synthesizes: each integration file's worker (local provisioning) and every
// `leaseq local deploy|destroy|provision`. Off for the run (workers and their children inherit it); the
// check itself runs once per stack variant in test/infra/cfn-validation.test.ts, and stays on in
// test/infra/cdk-synth.test.ts and the tarball test (the adopter's own app). CDK_VALIDATION=true keeps it.
process.env.CDK_VALIDATION ??= 'false';

// Most integration files spend their time waiting (visibility timeouts, leases running out, workers
// starting), not computing, so they run several at a time even on 2 cores. LEASEQ_TEST_WORKERS overrides.
const workers = Number(process.env.LEASEQ_TEST_WORKERS ?? 4);
const maxWorkers = Number.isInteger(workers) && workers > 0 ? workers : 4;
const TIMING = ['test/unit/core/leases/heartbeat.test.ts'];
/** Integration files that need a module graph of their own (vi.mock, a global tracer, OTEL_* settings). */
const ISOLATED = [
  'test/integration/pipeline/trace-load-failure.test.ts',
  'test/integration/pipeline/trace-flush.test.ts',
  'test/integration/cli/ui-browser.test.ts',
  'test/integration/local/emulator-guard.test.ts',
];

export default defineConfig({
  test: {
    // The SDK warns once per process that Node 20 support ends in 2027; tests need not repeat it.
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
    // Longest file first across the projects, so the file workers finish together (test/support/sequencer.ts).
    sequence: { sequencer: LongestFirstSequencer },
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts', 'test/infra/**/*.test.ts'],
          exclude: TIMING,
          testTimeout: 60_000,
          maxWorkers,
          // The unit files keep no state between files that another could see (they passed shuffled
          // this way), so a worker keeps its loaded modules from one file to the next: the project
          // took 119 s of CPU isolated and 80 s not (zod, the SDK and the CDK are loaded once a worker).
          isolate: false,
        },
      },
      {
        test: {
          name: 'timing',
          include: TIMING,
          testTimeout: 60_000,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
      {
        // The interleaving model (test/model): in-memory stores on a virtual clock, nothing running.
        // LEASEQ_MODEL_RUNS sets how many schedules (`npm run test:model`).
        test: {
          name: 'model',
          include: ['test/model/**/*.test.ts'],
          maxWorkers,
          testTimeout: 600_000,
        },
      },
      {
        test: {
          name: 'integration',
          maxWorkers,
          include: ['test/conformance/**/*.test.ts', 'test/integration/**/*.test.ts'],
          exclude: ISOLATED,
          globalSetup: ['test/support/global-setup.ts'],
          // Generous: with files running side by side a real-process test can take twice its time alone.
          testTimeout: 180_000,
          hookTimeout: 180_000,
          // A worker keeps its loaded modules from one file to the next (each file provisions its own
          // queues and tables under unique names): the project's CPU roughly halves (27 core files: 83 s
          // -> 40 s). The files that replace a module, register a global tracer or set process-wide
          // telemetry settings run isolated, below.
          isolate: false,
        },
      },
      {
        test: {
          name: 'integration-isolated',
          maxWorkers,
          include: ISOLATED,
          globalSetup: ['test/support/global-setup.ts'],
          testTimeout: 180_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});
