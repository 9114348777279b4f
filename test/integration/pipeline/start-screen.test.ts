import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { testEndpoint, uniqueName } from '../../support/env.ts';

// What a person sees: `leaseq start` in a real terminal (tmux), its screen read back with capture-pane.
// String tests of the summary cannot see a progress bar redrawn over a line, or bar residue.
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const socket = `leaseq-test-${randomBytes(4).toString('hex')}`;
const hasTmux = (() => {
  try {
    execFileSync('tmux', ['-V'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();
const tmux = (...args: string[]) => execFileSync('tmux', ['-L', socket, ...args], { encoding: 'utf8' });

afterAll(() => {
  if (hasTmux) {
    try {
      tmux('kill-server');
    } catch {
      // no server left
    }
  }
});

/** Starts `leaseq start <args>` in a 150x50 terminal; the pane stays after it exits and prints EXIT=<code>. */
function startInTerminal(session: string, args: string[]): void {
  const command = [
    `cd ${JSON.stringify(ROOT)}`,
    `AWS_ENDPOINT_URL=${testEndpoint()} node bin/leaseq.mjs start ${args.join(' ')}; echo EXIT=$?; sleep 600`,
  ].join(' && ');
  tmux('new-session', '-d', '-s', session, '-x', '150', '-y', '50', command);
}

const screen = (session: string) => tmux('capture-pane', '-p', '-J', '-t', session, '-S', '-200');

async function waitFor(session: string, pattern: RegExp, timeoutMs: number): Promise<string> {
  for (const started = Date.now(); ; ) {
    const text = screen(session);
    if (pattern.test(text)) return text;
    if (Date.now() - started > timeoutMs) throw new Error(`screen never showed ${pattern}:\n${text}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const demo = (prefix: string, jobs: number) => [
  '--prefix',
  prefix,
  '--jobs',
  String(jobs),
  '--workers',
  '2',
  '--crashes',
  '1',
  '--slow',
  '1',
  '--poison',
  '1',
  '--lease-ms',
  '1500',
];

describe.skipIf(!hasTmux)('Command: leaseq start, on a terminal', () => {
  it('ends with a clean verdict line and a bar that counts messages and jobs apart', async () => {
    // Act
    startInTerminal('done', demo(uniqueName('scr'), 40));
    const mid = await waitFor('done', /done \d+\/40 jobs/, 60_000);
    const text = await waitFor('done', /EXIT=\d+/, 120_000);

    // Assess: the bar said "sent N/M messages | done n/40 jobs" (M messages for 40 jobs + duplicates).
    expect(mid).toMatch(/sent \d+\/\d+ messages \| done \d+\/40 jobs/);
    const lines = text.split('\n');
    const verdict = lines.find((l) => l.includes(': VERIFIED in'));
    expect(verdict).toMatch(/^leaseq demo demo-\S+: VERIFIED in \d+\.\d s$/);
    expect(text).toMatch(/EXIT=0/);
    // No bar residue left on any summary line.
    const summaryStart = lines.indexOf(verdict ?? '');
    expect(lines.slice(summaryStart).filter((l) => /\d+%|\| done /.test(l))).toEqual([]);
  });

  it('on Ctrl-C keeps the stop message whole and shows the partial run without verdict rows', async () => {
    // Prepare: enough jobs that the run is still going when Ctrl-C comes.
    startInTerminal('stopped', demo(uniqueName('scr'), 3000));
    await waitFor('stopped', /done \d+\/3000 jobs/, 60_000);

    // Act
    tmux('send-keys', '-t', 'stopped', 'C-c');
    const text = await waitFor('stopped', /EXIT=\d+/, 90_000);

    // Assess
    const lines = text.split('\n');
    expect(lines).toContain('leaseq: stopping: draining workers (Ctrl-C again is not needed)');
    expect(text).toMatch(/: STOPPED before the end \(partial results\) in \d+\.\d s/);
    expect(text).toMatch(/partial run: \d+ jobs completed, \d+ dead-lettered, \d+ not finished yet/);
    expect(text).not.toMatch(/MISMATCH|money conserved/);
    expect(text).toMatch(/EXIT=130/);
  });
});
