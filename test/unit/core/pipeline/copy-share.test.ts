import { describe, expect, it } from 'vitest';
import { CopyShare, MEMORY, READ_FIRST_SHARE } from '../../../../shared/core/pipeline/copy-share.ts';

/** Notes `pattern` (true for a copy) and returns the decision taken before each note. */
function decisions(share: CopyShare, pattern: readonly boolean[]): boolean[] {
  return pattern.map((copy) => {
    const before = share.readFirst;
    share.note(copy);
    return before;
  });
}

const copies = (n: number) => Array<boolean>(n).fill(true);
const unique = (n: number) => Array<boolean>(n).fill(false);

describe('CopyShare: when a worker reads the job item before a fast run', () => {
  it('never reads when no copy comes (no read at 0 % duplicates), from the first message on', () => {
    const share = new CopyShare();
    expect(decisions(share, unique(5 * MEMORY))).not.toContain(true);
  });

  it('reads from the message after a first copy met among up to about 40 unique jobs', () => {
    const early = new CopyShare();
    expect(decisions(early, [...unique(39), true, false])).toEqual([...unique(40), true]);
    // One copy after 45 unique jobs is under a fortieth of what the worker met (their weight, decayed:
    // 200 x (1 - (1 - 1/200)^46) = 41.1): no read yet.
    const late = new CopyShare();
    expect(decisions(late, [...unique(45), true, false])).not.toContain(true);
  });

  it('keeps reading across a burst of unique jobs between bursts of copies (a window of 20 forgot them)', () => {
    const share = new CopyShare();
    // Bursts of 20 unique jobs and 20 copies, as a producer re-sending its batches sends them.
    const pattern = Array.from({ length: 10 }, () => [...unique(20), ...copies(20)]).flat();
    const taken = decisions(share, pattern);
    // Blind only until the first copy: the 20 unique jobs first, then that copy.
    expect(taken.indexOf(true)).toBe(21);
    expect(taken.slice(21)).not.toContain(false);
  });

  it('keeps reading at one copy in 20 (10 % duplicates, half of them caught by the local cache)', () => {
    const share = new CopyShare();
    const pattern = Array.from({ length: 50 }, () => [...unique(19), true]).flat();
    const taken = decisions(share, pattern);
    expect(taken.indexOf(true)).toBe(20);
    expect(taken.slice(20)).not.toContain(false);
  });

  it('stops reading once copies fall under a fortieth of the recent messages', () => {
    const share = new CopyShare();
    share.note(true);
    const taken = decisions(share, unique(MEMORY));
    // One copy then unique jobs: its weight falls to 1/40 of the messages' after 36 of them
    // (239 x (1 - 1/200)^k >= 200 holds up to k = 35).
    expect(taken.lastIndexOf(true)).toBe(35);
    expect(taken.indexOf(false)).toBe(36);
    expect(READ_FIRST_SHARE).toBe(1 / 40);
  });

  it('never reads at one copy in 100 once the first copy has left its mark', () => {
    const share = new CopyShare();
    const taken = decisions(share, Array.from({ length: 20 }, () => [...unique(99), true]).flat());
    expect(taken).not.toContain(true);
  });

  it('always reads when told to (the interleaving model turns that on)', () => {
    const share = new CopyShare(true);
    expect(decisions(share, unique(3))).toEqual([true, true, true]);
  });
});
