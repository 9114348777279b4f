import { afterAll, describe, expect, it } from 'vitest';
import type { DemoResult } from '../../../examples/ledger/demo/run-demo.ts';
import { leaseq } from '../cli/run-cli.ts';

// `npm start -- --runtime lambda`: the demo workload through the stack deployed to the emulator (stage
// demo), its function fired by the event source mapping, with the same verified summary.

afterAll(async () => {
  await leaseq(
    ['local', 'destroy', '--yes', '--stage', 'demo', '--output', '.leaseq/cdk.out'],
    { CI: 'true' },
    300_000,
  );
}, 300_000);

describe('Command: leaseq start --runtime lambda', () => {
  it('runs the demo through the deployed function and verifies the ledger', async () => {
    const run = await leaseq(
      [
        'start',
        '--runtime',
        'lambda',
        '--jobs',
        '120',
        '--crashes',
        '1',
        '--slow',
        '1',
        '--poison',
        '2',
        '--timeout',
        '150',
        '--json',
      ],
      { CI: 'true' },
      240_000,
    );
    expect(run.code, run.stderr.slice(-2000)).toBe(0);
    const result = JSON.parse(run.stdout) as DemoResult;
    expect(result).toMatchObject({ verified: true, runtime: 'lambda', completed: 118, deadLettered: 2 });
    expect(result.moneyActual).toBe(result.moneyExpected);
    expect(run.stderr).toContain('deployed leaseq-demo');
  }, 300_000);
});
