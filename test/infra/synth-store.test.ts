import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const TEMPLATE_MODULE = fileURLToPath(new URL('../../shared/local/provision-template.ts', import.meta.url));
const state = mkdtempSync(join(tmpdir(), 'leaseq-synth-store-'));
afterAll(() => rmSync(state, { recursive: true, force: true }));

interface Synth {
  readonly template: { Resources: Record<string, { Type: string }> };
  /** Whether the process loaded aws-cdk-lib (CommonJS: it shows in require's cache). */
  readonly cdkLoaded: boolean;
}

/** Synthesizes in a fresh process, as each test file, chaos run or CLI command does. */
function synthInChild(props: Record<string, unknown>, env: NodeJS.ProcessEnv = {}): Synth {
  const script = `
    import { createRequire } from 'node:module';
    const { synthesizedTemplate } = await import(${JSON.stringify(TEMPLATE_MODULE)});
    const template = await synthesizedTemplate(${JSON.stringify(props)});
    const cache = createRequire(import.meta.url).cache;
    const cdkLoaded = Object.keys(cache).some((k) => k.endsWith('/aws-cdk-lib/index.js'));
    process.stdout.write(JSON.stringify({ template, cdkLoaded }));`;
  const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    env: { ...process.env, LEASEQ_STATE_DIR: state, CDK_VALIDATION: 'false', ...env },
    encoding: 'utf8',
  });
  return JSON.parse(out) as Synth;
}

const entries = () => readdirSync(join(state, 'synth-cache')).filter((f) => f.endsWith('.json'));

describe('Synthesized templates kept on disk', () => {
  it('synthesizes once; a later process reads the same template without loading aws-cdk-lib', () => {
    const first = synthInChild({ resourcePrefix: 'store-a' });
    expect(first.cdkLoaded).toBe(true);
    expect(entries()).toHaveLength(1);
    const second = synthInChild({ resourcePrefix: 'store-a' });
    expect(second.cdkLoaded).toBe(false);
    expect(second.template).toEqual(first.template);
  });

  it('synthesizes again for other props, and for a damaged entry', () => {
    const fifo = synthInChild({ resourcePrefix: 'store-a', fifo: true });
    expect(fifo.cdkLoaded).toBe(true);
    expect(entries()).toHaveLength(2);
    const types = (s: Synth) => Object.values(s.template.Resources).map((r) => r.Type);
    expect(types(fifo)).toContain('AWS::SQS::Queue');

    for (const file of entries()) writeFileSync(join(state, 'synth-cache', file), '{"Resources": 1');
    const again = synthInChild({ resourcePrefix: 'store-a', fifo: true });
    expect(again.cdkLoaded).toBe(true);
    expect(again.template).toEqual(fifo.template);
    const repaired = entries().map((f) => readFileSync(join(state, 'synth-cache', f), 'utf8'));
    expect(repaired.filter((text) => text.startsWith('{"Resources":{'))).toHaveLength(1);
  });

  it('synthesizes again when the CDK context from the environment differs (CDK_CONTEXT_JSON)', () => {
    const alarms = (s: Synth) =>
      JSON.stringify(Object.values(s.template.Resources).filter((r) => r.Type === 'AWS::CloudWatch::Alarm'));
    const math = synthInChild({ resourcePrefix: 'store-ctx' });
    const counts = synthInChild(
      { resourcePrefix: 'store-ctx' },
      { CDK_CONTEXT_JSON: '{"rateAlarms":"counts"}' },
    );
    expect(alarms(counts)).not.toEqual(alarms(math));
    expect(alarms(synthInChild({ resourcePrefix: 'store-ctx' }))).toEqual(alarms(math));
  });

  it('keeps nothing with LEASEQ_SYNTH_CACHE=0', () => {
    const before = entries().length;
    const off = synthInChild({ resourcePrefix: 'store-off' }, { LEASEQ_SYNTH_CACHE: '0' });
    expect(off.cdkLoaded).toBe(true);
    expect(entries()).toHaveLength(before);
  });
});
