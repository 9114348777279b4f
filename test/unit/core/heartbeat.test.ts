import { describe, expect, it } from 'vitest';
import { LeaseLostError } from '../../../shared/core/errors.ts';
import { Heartbeat } from '../../../shared/core/heartbeat.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('Class: Heartbeat', () => {
  it('renews on every beat until stopped, and not after', async () => {
    let renewals = 0;
    const beat = new Heartbeat({
      intervalMs: 20,
      leaseUntil: Date.now() + 60_000,
      target: { renew: async () => ++renewals + Date.now() + 60_000 },
    }).start();
    await sleep(130);
    await beat.stop();
    const atStop = renewals;
    await sleep(60);
    expect(atStop).toBeGreaterThanOrEqual(3);
    expect(renewals).toBe(atStop);
    expect(beat.signal.aborted).toBe(false);
  });

  it('aborts its signal with LeaseLostError when a renewal is refused', async () => {
    const lost: LeaseLostError[] = [];
    const beat = new Heartbeat({
      intervalMs: 10,
      leaseUntil: Date.now() + 60_000,
      target: {
        renew: async () => {
          throw new LeaseLostError('job', 3, 'refused');
        },
      },
      onLost: (e) => lost.push(e),
    }).start();
    await sleep(50);
    expect(beat.signal.aborted).toBe(true);
    expect(beat.signal.reason).toBeInstanceOf(LeaseLostError);
    expect(lost).toHaveLength(1);
    await beat.stop();
  });

  it('keeps trying through store blips, and gives up once the lease has ended', async () => {
    const failures: unknown[] = [];
    const beat = new Heartbeat({
      intervalMs: 10,
      leaseUntil: Date.now() + 45,
      target: {
        renew: async () => {
          throw new Error('ECONNRESET');
        },
      },
      onRenewFailed: (e) => failures.push(e),
    }).start();
    await sleep(25);
    expect(beat.signal.aborted).toBe(false);
    await sleep(80);
    expect(failures.length).toBeGreaterThanOrEqual(1);
    expect(beat.signal.aborted).toBe(true);
    await beat.stop();
  });
});
