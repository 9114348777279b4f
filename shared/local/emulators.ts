/**
 * The AWS emulators leaseq knows how to install and run from PyPI. `docs/emulators.md` holds the
 * measurement that chose the default; the other stays here so the measurement can be repeated
 * (`LEASEQ_EMULATOR=moto`).
 */
export const EMULATOR_NAMES = ['ministack', 'moto'] as const;
export type EmulatorName = (typeof EMULATOR_NAMES)[number];

/** How to install and start one emulator. */
export interface EmulatorSpec {
  readonly name: EmulatorName;
  /** Pinned release. */
  readonly version: string;
  /** Top-level pip requirements (pinned). */
  readonly requirements: readonly string[];
  /**
   * Exact versions of every transitive dependency (pip `--constraint`), so a fresh machine installs
   * the set that was measured, not whatever PyPI serves that day.
   */
  readonly constraints: readonly string[];
  /** Oldest Python the release supports, as [major, minor]. */
  readonly minPython: readonly [number, number];
  /** Console script inside the virtualenv's `bin/`. */
  readonly executable: string;
  args(host: string, port: number): string[];
  env(host: string, port: number): Record<string, string>;
}

const ministack: EmulatorSpec = {
  name: 'ministack',
  version: '1.5.33',
  requirements: ['ministack==1.5.33'],
  constraints: [
    'botocore==1.43.106',
    'defusedxml==0.7.1',
    'graphql-core==3.2.12',
    'h11==0.16.0',
    'h2==4.4.1',
    'hpack==4.2.0',
    'Hypercorn==0.18.0',
    'hyperframe==6.1.0',
    'jmespath==1.1.0',
    'jsonata-python==0.7.1',
    'priority==2.0.0',
    'python-dateutil==2.9.0.post0',
    'PyYAML==6.0.4',
    'six==1.17.0',
    'urllib3==2.8.0',
    'wsproto==1.3.2',
  ],
  minPython: [3, 10],
  executable: 'ministack',
  args: () => [],
  env: (host, port) => ({
    // BIND_HOST is the listen address (its default is 0.0.0.0); MINISTACK_HOST only names the host in
    // URLs it returns (queue URLs). GATEWAY_PORT is the port.
    BIND_HOST: host,
    MINISTACK_HOST: host,
    GATEWAY_PORT: String(port),
    // Only what leaseq uses: the queues and tables, plus what `cdk bootstrap` and `cdk deploy` of the
    // stack need (CloudFormation, S3 for assets, STS, SSM for the bootstrap version, IAM for the roles,
    // Lambda and its logs for the worker function, CloudWatch for its dashboard and alarms).
    SERVICES: 'sqs,dynamodb,cloudformation,s3,sts,ssm,iam,lambda,logs,cloudwatch',
    PERSIST_STATE: '0',
    LOG_LEVEL: 'INFO',
  }),
};

const moto: EmulatorSpec = {
  name: 'moto',
  version: '5.2.5',
  requirements: ['moto[server]==5.2.5'],
  // moto[server] pulls ~60 packages (cfn-lint, sympy, docker, ...); pinned by the top level only.
  constraints: [],
  minPython: [3, 10],
  executable: 'moto_server',
  args: (host, port) => ['-H', host, '-p', String(port)],
  env: () => ({}),
};

export const EMULATORS: Readonly<Record<EmulatorName, EmulatorSpec>> = { ministack, moto };

/**
 * The emulator `leaseq local up` installs unless `LEASEQ_EMULATOR` says otherwise. MiniStack, because
 * it passed the whole conformance suite while moto let two of twenty concurrent conditional claims on a
 * new key both win (see docs/emulators.md for the table, timings and memory).
 */
export const DEFAULT_EMULATOR: EmulatorName = 'ministack';

export function isEmulatorName(value: string): value is EmulatorName {
  return (EMULATOR_NAMES as readonly string[]).includes(value);
}
