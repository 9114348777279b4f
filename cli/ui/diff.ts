/**
 * The line diff the fix-and-redrive confirmation shows (the dead payload against the edited one, each as
 * indented JSON). Pure and bounded: the common start and end are cut first, and a middle too large for
 * the longest-common-subsequence table is shown as removed then added.
 */

export interface DiffLine {
  readonly op: 'same' | 'add' | 'del';
  readonly text: string;
}

/** Largest middle (old lines × new lines) the LCS table is built for: 4 M cells, 16 MB. */
export const DIFF_MAX_CELLS = 4_000_000;

/** The lines of `before` and `after`, each kept, removed or added, in order. */
export function lineDiff(before: string, after: string): DiffLine[] {
  const a = before.split('\n');
  const b = after.split('\n');
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const head = a.slice(0, start).map((text) => ({ op: 'same' as const, text }));
  const tail = a.slice(endA).map((text) => ({ op: 'same' as const, text }));
  const midA = a.slice(start, endA);
  const midB = b.slice(start, endB);
  return [...head, ...middle(midA, midB), ...tail];
}

function middle(a: readonly string[], b: readonly string[]): DiffLine[] {
  const del = (text: string) => ({ op: 'del' as const, text });
  const add = (text: string) => ({ op: 'add' as const, text });
  if (a.length === 0 || b.length === 0 || (a.length + 1) * (b.length + 1) > DIFF_MAX_CELLS) {
    return [...a.map(del), ...b.map(add)];
  }
  const w = b.length + 1;
  // lcs[i * w + j]: the longest common subsequence of a[i..] and b[j..].
  const lcs = new Uint32Array((a.length + 1) * w);
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lcs[i * w + j] =
        a[i] === b[j]
          ? (lcs[(i + 1) * w + j + 1] ?? 0) + 1
          : Math.max(lcs[(i + 1) * w + j] ?? 0, lcs[i * w + j + 1] ?? 0);
    }
  }
  const out: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      out.push({ op: 'same', text: a[i] ?? '' });
      i++;
      j++;
    } else if ((lcs[(i + 1) * w + j] ?? 0) >= (lcs[i * w + j + 1] ?? 0)) {
      out.push(del(a[i++] ?? ''));
    } else {
      out.push(add(b[j++] ?? ''));
    }
  }
  while (i < a.length) out.push(del(a[i++] ?? ''));
  while (j < b.length) out.push(add(b[j++] ?? ''));
  return out;
}

/** Whether the diff changes anything. */
export function changes(diff: readonly DiffLine[]): number {
  return diff.filter((d) => d.op !== 'same').length;
}
