import { describe, expect, it } from 'vitest';
import { bulkFilter } from '../../../cli/commands/cancel.ts';
import { BulkRuns, PREVIEW_TTL_MS } from '../../../cli/ui/bulk-runs.ts';
import { formRate } from '../../../cli/ui/routes/bulk-cancel.ts';
import { describeBulkCancel } from '../../../shared/ops/bulk-cancel.ts';

describe('Class: BulkRuns', () => {
  describe('Method: takePreview', () => {
    it('gives a kept preview once, and none past its time', () => {
      // Prepare
      const runs = new BulkRuns<string, number>();
      const now = 1_000_000;
      const first = runs.keepPreview('a', now);
      const old = runs.keepPreview('b', now);

      // Act
      const taken = runs.takePreview(first, now + 1);
      const again = runs.takePreview(first, now + 2);
      const late = runs.takePreview(old, now + PREVIEW_TTL_MS + 1);
      const unknown = runs.takePreview('made-up', now);

      // Assess
      expect([taken, again, late, unknown]).toEqual(['a', undefined, undefined, undefined]);
    });
  });

  describe('Method: start', () => {
    it('counts progress, keeps the result, and hands the stop signal to the work', async () => {
      // Prepare
      const runs = new BulkRuns<string, number>();
      let seen: AbortSignal | undefined;

      // Act
      const run = runs.start({ title: 't', by: 'me', total: 2 }, async (signal, progress) => {
        seen = signal;
        progress('one');
        progress('two');
        return 7;
      });
      run.stop.abort();
      await new Promise((resolve) => setImmediate(resolve));

      // Assess
      expect(runs.run(run.id)).toMatchObject({ done: 2, last: 'two', result: 7 });
      expect(seen?.aborted).toBe(true);
    });
  });
});

describe('Function: formRate', () => {
  it('takes 0.1 to 100 jobs a second, 10 when empty, nothing else', () => {
    expect([
      formRate(''),
      formRate('0.5'),
      formRate('100'),
      formRate('0'),
      formRate('101'),
      formRate('x'),
    ]).toEqual([10, 0.5, 100, undefined, undefined, undefined]);
  });
});

describe('Function: bulkFilter', () => {
  it('is undefined for a key alone, the filter for flags alone, and refuses a mix in one line', () => {
    expect(bulkFilter('k', {})).toBeUndefined();
    expect(bulkFilter(undefined, { type: 't', errorMatch: 'boom' })).toEqual({
      type: 't',
      errorContains: 'boom',
    });
    expect(() => bulkFilter('k', { since: 1000, dryRun: true })).toThrow(
      'a dedup key cancels one job; --since, --dry-run are for a cancel by filter: drop the key or the flag',
    );
  });
});

describe('Function: describeBulkCancel', () => {
  it('counts refusals by why, and says what an interruption left', () => {
    const text = describeBulkCancel({
      cancelled: 1,
      refused: 2,
      failed: 0,
      notReached: 3,
      interrupted: true,
      items: [
        { dedupKey: 'a', outcome: 'cancelled' },
        {
          dedupKey: 'b',
          outcome: 'refused',
          status: 'COMPLETED',
          why: 'finished since the preview (COMPLETED)',
        },
        { dedupKey: 'c', outcome: 'refused', status: 'CANCELLED', why: 'already cancelled' },
      ],
    });
    expect(text).toBe(
      'cancelled 1, refused 2 (1 finished (COMPLETED), 1 already cancelled), failed 0; interrupted: 3 previewed jobs not reached, left as they were',
    );
  });
});
