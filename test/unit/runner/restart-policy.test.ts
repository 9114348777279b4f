import { describe, expect, it } from 'vitest';
import { RestartPolicy, type WorkerExit } from '../../../shared/runner/restart-policy.ts';

const exit = (overrides: Partial<WorkerExit> = {}): WorkerExit => ({
  id: 'w1',
  ready: true,
  exitCode: 1,
  exitSignal: null,
  logFile: '/logs/w1.log',
  ...overrides,
});

describe('Class: RestartPolicy', () => {
  it('replaces a worker that died after it polled, the pause doubling with each death in the last minute', () => {
    let now = 0;
    const policy = new RestartPolicy({ now: () => now });
    const delays = [1, 2, 3, 4, 5, 6, 7, 8].map(() => policy.decide(exit()));
    expect(delays.map((d) => (d.action === 'restart' ? d.delayMs : d.action))).toEqual([
      500, 1000, 2000, 4000, 8000, 16000, 30000, 30000,
    ]);
    now = 61_000;
    expect(policy.decide(exit())).toEqual({ action: 'restart', delayMs: 500 });
    expect(policy.restarts).toBe(9);
  });

  it('gives up after three deaths in a row before any poll, naming the last one', () => {
    const policy = new RestartPolicy();
    expect(policy.decide(exit({ ready: false })).action).toBe('restart');
    expect(policy.decide(exit({ ready: false })).action).toBe('restart');
    expect(
      policy.decide(exit({ id: 'w3', ready: false, startError: 'EAGAIN', logFile: '/l/w3.log' })),
    ).toEqual({
      action: 'give-up',
      reason: 'workers keep dying before they poll (last: w3, could not start: EAGAIN); see /l/w3.log',
    });
  });

  it('counts only deaths in a row: one that polled in between starts the count again', () => {
    const policy = new RestartPolicy();
    policy.decide(exit({ ready: false }));
    policy.decide(exit({ ready: false }));
    policy.decide(exit({ ready: true }));
    expect(policy.decide(exit({ ready: false })).action).toBe('restart');
    expect(policy.decide(exit({ ready: false, exitSignal: 'SIGKILL' })).action).toBe('restart');
  });
});
