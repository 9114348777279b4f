/**
 * What a local deploy signs with and where it locks: the CloudFormation client, the cdk commands'
 * environment (endpoint, keys, account) and the bootstrap lock in the private state directory.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import type { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { isLocalEndpoint } from '../aws/clients.ts';
import {
  ANY_CREDENTIAL,
  defaultStateDir,
  type LocalCredential,
  localCredentialProvider,
  ownCredentialFor,
} from '../aws/local-credential.ts';
import { loadOptional } from '../optional-package.ts';
import { checkStateDir } from './state-dir.ts';

type CloudFormationSdk = typeof import('@aws-sdk/client-cloudformation');

/** The CloudFormation client is an optional peer: only deploys to the emulator need it. */
export const cloudFormationSdk = () => loadOptional<CloudFormationSdk>('@aws-sdk/client-cloudformation');

/** Where a deploy goes and what it signs with (`LocalDeployOptions` has these). */
interface DeployTarget {
  readonly endpoint: string;
  readonly region: string;
  readonly credentials?: LocalCredential;
  readonly lockDir?: string;
}

/**
 * A CloudFormation client for the emulator at `endpoint`: signed with `credentials`, else (a loopback
 * endpoint) the embedded emulator's credential as every leaseq client finds it, else `test`/`test`.
 * @throws ConfigError when @aws-sdk/client-cloudformation is not installed (one line that says so).
 */
export async function localCloudFormation(
  endpoint: string,
  region: string,
  credentials?: LocalCredential,
): Promise<CloudFormationClient> {
  const { CloudFormationClient } = await cloudFormationSdk();
  return new CloudFormationClient({
    region,
    endpoint,
    credentials: credentials
      ? { ...credentials, accountId: LOCAL_ACCOUNT }
      : isLocalEndpoint(endpoint)
        ? localCredentialProvider(endpoint)
        : { ...ANY_CREDENTIAL, accountId: LOCAL_ACCOUNT },
  });
}

/** The account of every local emulator. */
export const LOCAL_ACCOUNT = '000000000000';

/**
 * The keys the cdk commands sign with: the given ones; for a loopback endpoint the embedded emulator's
 * (its port's credential in the state directory), else the environment's (`eval "$(leaseq local env)"`
 * where that emulator runs); else `test`/`test`. An endpoint elsewhere never gets the environment's.
 */
function deployCredential(options: Pick<DeployTarget, 'endpoint' | 'credentials'>): LocalCredential {
  if (options.credentials) return options.credentials;
  if (!isLocalEndpoint(options.endpoint)) return ANY_CREDENTIAL;
  const own = ownCredentialFor(options.endpoint);
  if (own) return own;
  const { AWS_ACCESS_KEY_ID: accessKeyId, AWS_SECRET_ACCESS_KEY: secretAccessKey } = process.env;
  return accessKeyId && secretAccessKey ? { accessKeyId, secretAccessKey } : ANY_CREDENTIAL;
}

/**
 * One lock file per emulator and region, in the emulator's private state directory (checked to be the
 * operator's own): in a shared /tmp its predictable name let another user hold it and stall every deploy.
 */
export function bootstrapLockFile(options: Pick<DeployTarget, 'endpoint' | 'region' | 'lockDir'>): string {
  const dir = options.lockDir ?? defaultStateDir();
  checkStateDir(dir);
  const id = createHash('sha256').update(`${options.endpoint} ${options.region}`).digest('hex').slice(0, 16);
  return join(dir, `bootstrap-${id}.lock`);
}

/**
 * The environment of the cdk commands: this process's, plus the emulator's endpoint and its keys, less
 * every service's own endpoint (`AWS_ENDPOINT_URL_S3`, ...): the SDK would send that service elsewhere,
 * signed with the emulator's keys, and a deploy acts on the emulator only.
 */
export function cdkEnv(
  options: Pick<DeployTarget, 'endpoint' | 'region' | 'credentials'>,
): NodeJS.ProcessEnv {
  const credential = deployCredential(options);
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith('AWS_ENDPOINT_URL_')),
  );
  return {
    ...inherited,
    AWS_ACCESS_KEY_ID: credential.accessKeyId,
    AWS_SECRET_ACCESS_KEY: credential.secretAccessKey,
    AWS_SESSION_TOKEN: '',
    AWS_PROFILE: '',
    AWS_ENDPOINT_URL: options.endpoint,
    AWS_REGION: options.region,
    AWS_DEFAULT_REGION: options.region,
    CDK_DEFAULT_ACCOUNT: LOCAL_ACCOUNT,
    CDK_DEFAULT_REGION: options.region,
  };
}
