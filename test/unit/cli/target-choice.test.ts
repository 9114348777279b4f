import { describe, expect, it } from 'vitest';
import { type Change, type ConfirmIo, confirmChange, isInteractive } from '../../../cli/confirm.ts';
import {
  awsQueueUrl,
  chooseTarget,
  describeTarget,
  NO_TARGET_MESSAGE,
  type TargetFlags,
} from '../../../cli/target.ts';

const stopped = async () => ({
  mode: 'embedded' as const,
  running: false,
  endpoint: 'http://127.0.0.1:4566',
});
const running = async () => ({
  mode: 'embedded' as const,
  running: true,
  endpoint: 'http://127.0.0.1:4566',
  pid: 4242,
});
const never = async (): Promise<never> => {
  throw new Error('the emulator must not be looked for');
};
const AWS_OUTPUTS_URL = 'https://sqs.eu-west-1.amazonaws.com/111122223333/leaseq-prod-jobs';

function choose(flags: TargetFlags, env: NodeJS.ProcessEnv, emulator = stopped, outputsQueueUrl?: string) {
  return chooseTarget(flags, env, { emulator, ...(outputsQueueUrl ? { outputsQueueUrl } : {}) });
}

describe('Logic: which target a command acts on', () => {
  it('refuses, without calling AWS, when nothing chose a target, whatever credentials and region are set', async () => {
    for (const env of [
      {},
      { AWS_PROFILE: 'prod', AWS_REGION: 'eu-west-1' },
      { AWS_ACCESS_KEY_ID: 'AKIA', AWS_SECRET_ACCESS_KEY: 'x', AWS_DEFAULT_REGION: 'us-east-1' },
    ]) {
      await expect(choose({}, env)).rejects.toThrow(NO_TARGET_MESSAGE);
      await expect(choose({ region: 'eu-west-1' }, env)).rejects.toThrow(NO_TARGET_MESSAGE);
    }
    expect(NO_TARGET_MESSAGE).not.toContain('\n');
    expect(NO_TARGET_MESSAGE).toMatch(/--aws/);
  });

  it('takes --endpoint first, then AWS_ENDPOINT_URL, then the running emulator, and says why', async () => {
    await expect(
      choose({ endpoint: 'http://127.0.0.1:9' }, { AWS_ENDPOINT_URL: 'http://127.0.0.1:8' }, never),
    ).resolves.toEqual({
      kind: 'endpoint',
      endpoint: 'http://127.0.0.1:9',
      region: 'us-east-1',
      why: '--endpoint',
    });
    await expect(
      choose({}, { AWS_ENDPOINT_URL: ' http://127.0.0.1:8 ', AWS_REGION: 'eu-west-1' }, never),
    ).resolves.toEqual({
      kind: 'endpoint',
      endpoint: 'http://127.0.0.1:8',
      region: 'eu-west-1',
      why: 'AWS_ENDPOINT_URL',
    });
    const emulator = await choose({}, {}, running);
    expect(emulator).toMatchObject({
      kind: 'emulator',
      endpoint: 'http://127.0.0.1:4566',
      region: 'us-east-1',
    });
    expect(emulator.why).toMatch(/^running, pid 4242, started by leaseq/);
    await expect(choose({ endpoint: 'not a url' }, {})).rejects.toThrow(/is not a URL/);
  });

  it('names an endpoint that is not a URL without the password written into it', async () => {
    for (const [flags, env] of [
      [{ endpoint: 'http://ops:s3cr3t@127.0.0.1:45x66' }, {}],
      [{}, { AWS_ENDPOINT_URL: 'http://ops:s3cr3t@127.0.0.1:45x66' }],
    ] as const) {
      const refused = await choose(flags, env, never).then(
        () => 'chosen',
        (error: Error) => error.message,
      );
      expect(refused).toBe(
        'endpoint "http://***@127.0.0.1:45x66" is not a URL (expected e.g. http://127.0.0.1:4566)',
      );
    }
  });

  it('acts on AWS only with --aws and a region, and says where the credentials come from', async () => {
    await expect(choose({ aws: true }, {}, never)).rejects.toThrow(
      '--aws needs a region: pass --region <region> or set AWS_REGION',
    );
    await expect(choose({ aws: true, region: 'eu-west-1' }, { AWS_PROFILE: 'prod' }, never)).resolves.toEqual(
      {
        kind: 'aws',
        endpoint: undefined,
        region: 'eu-west-1',
        why: '--aws, region from --region; credentials: AWS_PROFILE=prod',
      },
    );
    // --aws wins over a running emulator: the user said so.
    await expect(choose({ aws: true }, { AWS_DEFAULT_REGION: 'ap-south-1' }, running)).resolves.toMatchObject(
      {
        kind: 'aws',
        region: 'ap-south-1',
      },
    );
  });

  it('refuses contradicting choices instead of picking one', async () => {
    await expect(choose({ aws: true, endpoint: 'http://127.0.0.1:1' }, { AWS_REGION: 'x' })).rejects.toThrow(
      'both --aws and --endpoint given: choose one',
    );
    // The SDK itself would send "AWS" requests to these: --aws must not.
    for (const name of ['AWS_ENDPOINT_URL', 'AWS_ENDPOINT_URL_SQS']) {
      await expect(
        choose({ aws: true, region: 'eu-west-1' }, { [name]: 'http://127.0.0.1:1' }, never),
      ).rejects.toThrow(
        new RegExp(`^--aws, but ${name} would send the requests to http://127\\.0\\.0\\.1:1`),
      );
    }
    await expect(
      choose({ outputs: 'o.json', region: 'us-east-1' }, {}, never, AWS_OUTPUTS_URL),
    ).rejects.toThrow('--outputs o.json names queues in eu-west-1, but --region is us-east-1: drop one');
  });

  it('takes stack outputs that name queues on AWS as the choice of that deployment', async () => {
    const choice = await choose(
      { outputs: 'cdk-outputs.json' },
      { AWS_PROFILE: 'p' },
      running,
      AWS_OUTPUTS_URL,
    );
    expect(choice).toEqual({
      kind: 'aws',
      endpoint: undefined,
      region: 'eu-west-1',
      why: '--outputs cdk-outputs.json names queues of AWS account 111122223333; credentials: AWS_PROFILE=p',
    });
    // Outputs of a local deploy name the emulator's queues: they choose nothing, and say so when the
    // emulator they name is not running.
    const local = 'http://127.0.0.1:4566/000000000000/leaseq-dev-jobs';
    await expect(choose({ outputs: 'o.json' }, {}, stopped, local)).rejects.toThrow(
      '--outputs o.json names queues on http://127.0.0.1:4566, where nothing runs (no embedded emulator started)',
    );
    await expect(choose({ outputs: 'o.json' }, {}, running, local)).resolves.toMatchObject({
      kind: 'emulator',
    });
    // The documentation's example account on an AWS host is nobody's deployment, and not the embedded
    // emulator's; an endpoint the user chose (moto names AWS hosts with it) takes it.
    const example = 'https://sqs.us-east-1.amazonaws.com/123456789012/leaseq-dev-jobs';
    for (const emulator of [stopped, running]) {
      await expect(choose({ outputs: 'o.json' }, {}, emulator, example)).rejects.toThrow(
        '--outputs o.json names queues of account 123456789012 on an AWS host',
      );
    }
    await expect(
      choose({ outputs: 'o.json' }, { AWS_ENDPOINT_URL: 'http://127.0.0.1:5000' }, never, example),
    ).resolves.toMatchObject({ kind: 'endpoint', why: 'AWS_ENDPOINT_URL' });
    expect(awsQueueUrl(AWS_OUTPUTS_URL)).toEqual({ region: 'eu-west-1', account: '111122223333' });
    expect(awsQueueUrl('https://sqs.us-east-1.amazonaws.com/000000000000/q')).toBeUndefined();
    expect(awsQueueUrl('http://localhost:4566/000000000000/q')).toBeUndefined();
  });

  it('prints one line naming the target, its account and region, and why', () => {
    const base = { region: 'us-east-1', account: '000000000000', local: true };
    expect(
      describeTarget({
        ...base,
        kind: 'emulator',
        endpoint: 'http://127.0.0.1:4566',
        why: 'running, pid 1, started by leaseq',
      }),
    ).toBe(
      'target: local emulator http://127.0.0.1:4566, account 000000000000, region us-east-1 (running, pid 1, started by leaseq)',
    );
    expect(
      describeTarget({
        ...base,
        kind: 'aws',
        endpoint: undefined,
        account: '111122223333',
        local: false,
        why: '--aws',
      }),
    ).toBe('target: AWS account 111122223333, region us-east-1 (--aws)');
  });
});

describe('Logic: confirming a change', () => {
  const change: Change = { verb: 'purge', name: 'leaseq-x-dlq', what: 'delete all 3 messages', local: false };
  function io(interactive: boolean, answer = ''): ConfirmIo & { lines: string[]; asked: string[] } {
    const lines: string[] = [];
    const asked: string[] = [];
    return {
      interactive,
      lines,
      asked,
      ask: async (q) => {
        asked.push(q);
        return answer;
      },
      note: (l) => lines.push(l),
    };
  }

  it('refuses without a person to ask and without --yes, printing and asking nothing', async () => {
    const quiet = io(false, 'y');
    await expect(confirmChange(change, undefined, quiet)).rejects.toThrow(
      'refusing to purge leaseq-x-dlq without confirmation: not a terminal, pass --yes',
    );
    expect(quiet.asked).toEqual([]);
  });

  it('goes on with --yes after saying what it changes', async () => {
    const yes = io(false);
    await expect(confirmChange(change, true, yes)).resolves.toBe(true);
    expect(yes.lines).toEqual(['purge: delete all 3 messages']);
    expect(yes.asked).toEqual([]);
  });

  it('asks for the name outside this machine and y/N on a local emulator', async () => {
    await expect(confirmChange(change, undefined, io(true, 'leaseq-x-dlq'))).resolves.toBe(true);
    const wrong = io(true, 'y');
    await expect(confirmChange(change, undefined, wrong)).resolves.toBe(false);
    expect(wrong.asked).toEqual(['type leaseq-x-dlq to purge it (anything else cancels): ']);
    expect(wrong.lines.at(-1)).toBe('purge cancelled; nothing was changed');
    const local = { ...change, local: true };
    await expect(confirmChange(local, undefined, io(true, 'yes'))).resolves.toBe(true);
    await expect(confirmChange(local, undefined, io(true, ''))).resolves.toBe(false);
  });

  it('is interactive only on two terminals and outside CI', () => {
    expect(isInteractive({}, true, true)).toBe(true);
    expect(isInteractive({ CI: 'true' }, true, true)).toBe(false);
    expect(isInteractive({ CI: 'false' }, true, true)).toBe(true);
    expect(isInteractive({}, false, true)).toBe(false);
    expect(isInteractive({}, true, false)).toBe(false);
  });
});

describe('resolveTarget on an --outputs file that is not JSON', () => {
  it('says so in one line without quoting the file (a key file passed by mistake stays unprinted)', async () => {
    const { mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { resolveTarget } = await import('../../../cli/target.ts');
    const dir = mkdtempSync(join(tmpdir(), 'leaseq-outputs-'));
    try {
      const file = join(dir, 'outputs.json');
      writeFileSync(file, 'wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY\n');
      const error = await resolveTarget({ outputs: file }, {}, () => {}).catch((e: unknown) => e);
      expect((error as Error).message).toBe(
        `cannot read stack outputs from ${file}: not valid JSON; write them with \`npx cdk deploy --outputs-file ${file}\``,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
