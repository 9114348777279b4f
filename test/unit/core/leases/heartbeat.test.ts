import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Heartbeat } from '../../../../shared/core/leases/heartbeat.ts';
import { DeadlineError, LeaseLostError, LeaseRanOutError } from '../../../../shared/errors.ts';

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
    // Renewals were tried and failed: the store's fault, so the attempt may be refunded.
    expect(beat.signal.reason).toMatchObject({ name: 'LeaseRanOutError', renewalFailed: true });
    await beat.stop();
  });
});

/** Blocks the event loop for `ms`, as a job's synchronous work does. */
function blockFor(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // spin: nothing else runs meanwhile, not even the heartbeat's timers
  }
}

// Defect 4 (issue 18): a job that starves its own event loop past its lease must not have the attempt
// refunded. The heartbeat tells the two run-outs apart for decideFailure: renewalFailed.
describe('Class: Heartbeat (a job that blocks the event loop, real timers)', () => {
  it('ends a lease the job starved before any renewal was sent with renewalFailed false, and sends none late', async () => {
    let renewals = 0;
    const beat = new Heartbeat({
      intervalMs: 100,
      leaseUntil: Date.now() + 300,
      safetyMs: 30,
      target: {
        renew: async () => {
          renewals += 1;
          return Date.now() + 300;
        },
      },
    }).start();
    try {
      blockFor(400);
      await sleep(20);
      expect(beat.signal.reason).toBeInstanceOf(LeaseRanOutError);
      expect(beat.signal.reason).toMatchObject({ renewalFailed: false });
      expect(renewals).toBe(0);
    } finally {
      await beat.stop();
    }
  });

  it('counts a renewal whose answer the job kept from being read (blocked loop) as starved, not failed', async () => {
    let renewals = 0;
    const beat = new Heartbeat({
      intervalMs: 100,
      leaseUntil: Date.now() + 300,
      safetyMs: 30,
      target: {
        renew: async () => {
          renewals += 1;
          // The job blocks the loop right after the renewal went out; its answer is there 5 ms later
          // but, like network I/O, is read only after the timers that came due meanwhile.
          if (renewals === 1) setTimeout(() => blockFor(400), 0);
          await new Promise((answered) => setTimeout(() => setImmediate(answered), 5));
          return Date.now() + 300;
        },
      },
    }).start();
    try {
      await sleep(600);
      expect(beat.signal.reason).toBeInstanceOf(LeaseRanOutError);
      expect(beat.signal.reason).toMatchObject({ renewalFailed: false });
    } finally {
      await beat.stop();
    }
  });
});

describe('Class: Heartbeat (scheduled from the lease, fake timers)', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: Date.parse('2026-12-01T00:00:00Z') });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  /** A target whose renewals grant `leaseMs` from the time they were asked, after `answerMs`. */
  function target(leaseMs: number, answerMs = 0) {
    const asked: number[] = [];
    return {
      asked,
      renew: async (signal: AbortSignal) => {
        const at = Date.now();
        asked.push(at);
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(resolve, answerMs);
          signal.addEventListener('abort', () => {
            clearTimeout(timer);
            reject(signal.reason);
          });
        });
        return at + leaseMs;
      },
    };
  }

  it('beats at once when the lease was requested more than a period ago (a slow claim answer)', async () => {
    const t = target(3000);
    const start = Date.now();
    const beat = new Heartbeat({
      target: t,
      intervalMs: 1000,
      leaseUntil: start + 400,
      renewedAt: start - 2600,
      safetyMs: 100,
    }).start();
    await vi.advanceTimersByTimeAsync(1);
    expect(t.asked).toEqual([start]);
    // The next beat is a period after this renewal was asked.
    await vi.advanceTimersByTimeAsync(1000);
    expect(t.asked).toEqual([start, start + 1000]);
    await beat.stop();
  });

  it('keeps a fixed rhythm from each renewal request, however long the answer took', async () => {
    const t = target(3000, 400);
    const start = Date.now();
    const beat = new Heartbeat({
      target: t,
      intervalMs: 1000,
      leaseUntil: start + 3000,
      renewedAt: start,
    }).start();
    await vi.advanceTimersByTimeAsync(3500);
    expect(t.asked.map((at) => at - start)).toEqual([1000, 2000, 3000]);
    expect(beat.signal.aborted).toBe(false);
    await beat.stop();
  });

  it('abandons a renewal that would answer after the lease, and stops the work before the lease ends', async () => {
    const t = target(3000, 60_000);
    const start = Date.now();
    let abortedAt = 0;
    const beat = new Heartbeat({
      target: t,
      intervalMs: 1000,
      leaseUntil: start + 3000,
      renewedAt: start,
      safetyMs: 300,
    }).start();
    beat.signal.addEventListener('abort', () => {
      abortedAt = Date.now();
    });
    await vi.advanceTimersByTimeAsync(5000);
    expect(beat.signal.reason).toBeInstanceOf(LeaseLostError);
    expect(beat.signal.reason).toMatchObject({ name: 'LeaseRanOutError', renewalFailed: true });
    expect(abortedAt - start).toBe(2700);
    await beat.stop();
  });

  it('retries a failed renewal before the lease ends, not a full period later', async () => {
    let calls = 0;
    const start = Date.now();
    const asked: number[] = [];
    const beat = new Heartbeat({
      intervalMs: 1000,
      leaseUntil: start + 3000,
      renewedAt: start,
      safetyMs: 300,
      target: {
        renew: async () => {
          asked.push(Date.now() - start);
          calls += 1;
          if (calls <= 2) throw new Error('ECONNRESET');
          return Date.now() + 3000;
        },
      },
    }).start();
    await vi.advanceTimersByTimeAsync(2800);
    // 1000: fails; 2000: fails; then one last try half a period before the lease must hold (2700).
    expect(asked).toEqual([1000, 2000, 2200]);
    expect(beat.signal.aborted).toBe(false);
    await beat.stop();
  });

  it('aborts with DeadlineError at the deadline, and a lease that ends at the deadline ends as a deadline', async () => {
    const start = Date.now();
    const atDeadline = new Heartbeat({
      target: target(3000),
      intervalMs: 1000,
      leaseUntil: start + 10_000,
      deadline: start + 1500,
    }).start();
    await vi.advanceTimersByTimeAsync(1500);
    expect(atDeadline.signal.reason).toBeInstanceOf(DeadlineError);
    await atDeadline.stop();

    const capped = new Heartbeat({
      target: target(60_000, 60_000),
      intervalMs: 1000,
      leaseUntil: Date.now() + 2000,
      deadline: Date.now() + 2000,
      safetyMs: 200,
    }).start();
    await vi.advanceTimersByTimeAsync(1900);
    expect(capped.signal.reason).toBeInstanceOf(DeadlineError);
    await capped.stop();
  });

  it("stops quietly when a renewal is refused by the job's own commit: not a lost lease", async () => {
    const lost: unknown[] = [];
    const beat = new Heartbeat({
      intervalMs: 1000,
      leaseUntil: Date.now() + 3000,
      onLost: (error) => lost.push(error),
      target: {
        renew: async () => {
          throw new LeaseLostError('job', 3, 'renew refused: status COMPLETED', undefined, true);
        },
      },
    }).start();
    await vi.advanceTimersByTimeAsync(1500);
    expect(lost).toEqual([]);
    expect(beat.signal.aborted).toBe(false);
    await beat.stop();
  });
});
