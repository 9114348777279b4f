import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { localCredentialProvider } from './local-credential.ts';

/** The services leaseq talks to, by the SDK's name for their endpoint variable's suffix. */
export type AwsService =
  | 'sqs'
  | 'dynamodb'
  | 's3'
  | 'sts'
  | 'lambda'
  | 'cloudformation'
  | 'cloudwatch'
  | 'logs';

/**
 * Each service's own endpoint variable, as the SDK names them (`AWS_ENDPOINT_URL_` and the service id):
 * one set wins over `AWS_ENDPOINT_URL` for that service only.
 */
export const SERVICE_ENDPOINT_VARIABLES: Readonly<Record<AwsService, string>> = {
  sqs: 'AWS_ENDPOINT_URL_SQS',
  dynamodb: 'AWS_ENDPOINT_URL_DYNAMODB',
  s3: 'AWS_ENDPOINT_URL_S3',
  sts: 'AWS_ENDPOINT_URL_STS',
  lambda: 'AWS_ENDPOINT_URL_LAMBDA',
  cloudformation: 'AWS_ENDPOINT_URL_CLOUDFORMATION',
  cloudwatch: 'AWS_ENDPOINT_URL_CLOUDWATCH',
  logs: 'AWS_ENDPOINT_URL_CLOUDWATCH_LOGS',
};

/** Where and how the AWS clients connect. Built once in a composition root, then passed in. */
export interface AwsConfig {
  /** Every service's endpoint but those `endpoints` names; `undefined` means real AWS. Emulators and LocalStack set it. */
  readonly endpoint?: string;
  /** One service's own endpoint, over `endpoint` for that service (`AWS_ENDPOINT_URL_SQS`, ...). */
  readonly endpoints?: Readonly<Partial<Record<AwsService, string>>>;
  /** @default 'us-east-1' */
  readonly region: string;
  /**
   * Connection timeout per attempt, so an unreachable endpoint is reported in seconds, not minutes.
   * @default 3000
   */
  readonly connectTimeoutMs?: number;
  /** Longest wait for a DynamoDB answer per attempt; past it the attempt fails. @default 10000 */
  readonly requestTimeoutMs?: number;
  /**
   * Longest wait for an SQS answer per attempt; above the 20 s long-poll maximum so long polls survive.
   * @default 25000
   */
  readonly sqsRequestTimeoutMs?: number;
  /** SDK attempts per call (1 = no SDK retry). @default 3 */
  readonly maxAttempts?: number;
  /**
   * Keys to sign with, on `endpoint` only (a service on an endpoint of its own in `endpoints` signs as
   * the default says for that endpoint). @default for a loopback endpoint, the embedded emulator's credential from the
   * state directory (`local-credential.ts`), else the environment's keys, else `test`/`test`; for any
   * other endpoint, the SDK's default provider chain.
   */
  readonly credentials?: { readonly accessKeyId: string; readonly secretAccessKey: string };
}

export interface AwsClients {
  readonly sqs: SQSClient;
  readonly ddb: DynamoDBClient;
  readonly doc: DynamoDBDocumentClient;
}

/**
 * Reads the endpoint and region from the environment. Only composition roots call this;
 * adapters never read the environment themselves.
 */
export function awsConfigFromEnv(env: NodeJS.ProcessEnv = process.env, fallbackEndpoint?: string): AwsConfig {
  const endpoint = env.AWS_ENDPOINT_URL?.trim() || fallbackEndpoint;
  const endpoints = serviceEndpointsFromEnv(env);
  return {
    ...(endpoint ? { endpoint } : {}),
    ...(Object.keys(endpoints).length > 0 ? { endpoints } : {}),
    region: env.AWS_REGION ?? env.AWS_DEFAULT_REGION ?? 'us-east-1',
  };
}

/** The per-service endpoint variables that are set (blank ones are not), by service. */
export function serviceEndpointsFromEnv(
  env: NodeJS.ProcessEnv = process.env,
): Partial<Record<AwsService, string>> {
  const endpoints: Partial<Record<AwsService, string>> = {};
  for (const [service, variable] of Object.entries(SERVICE_ENDPOINT_VARIABLES)) {
    const value = env[variable]?.trim();
    if (value) endpoints[service as AwsService] = value;
  }
  return endpoints;
}

/** The endpoint `service` uses: its own (`AWS_ENDPOINT_URL_<SERVICE>`), else the shared one, else AWS. */
export function serviceEndpoint(config: Pick<AwsConfig, 'endpoint' | 'endpoints'>, service: AwsService) {
  return config.endpoints?.[service] ?? config.endpoint;
}

/** True when the endpoint is an emulator on this machine (dummy credentials are fine there). */
export function isLocalEndpoint(endpoint: string | undefined): boolean {
  if (!endpoint) return false;
  try {
    const host = new URL(endpoint).hostname;
    return host === '127.0.0.1' || host === 'localhost' || host === '::1' || host === '[::1]';
  } catch {
    return false;
  }
}

/**
 * Builds the SQS and DynamoDB clients with each one's endpoint (`serviceEndpoint`) set explicitly (some
 * emulators return queue URLs naming hosts that do not resolve here; the SDK must still talk to it), and
 * each signing for its own endpoint: the embedded emulator's credential only where that endpoint is it.
 */
export function createAwsClients(config: AwsConfig): AwsClients {
  // throwOnRequestTimeout: without it the SDK only logs a warning, and an endpoint that accepts the
  // connection but never answers hangs the caller for ever.
  const handler = (requestTimeout: number) =>
    new NodeHttpHandler({
      connectionTimeout: config.connectTimeoutMs ?? 3000,
      requestTimeout,
      throwOnRequestTimeout: true,
    });
  const common = (endpoint: string | undefined) => ({
    region: config.region,
    maxAttempts: config.maxAttempts ?? 3,
    ...(endpoint ? { endpoint } : {}),
    // The embedded emulator serves only its own credential; real AWS uses the default provider chain.
    // Given keys are for the shared endpoint: a service on one of its own signs for that one instead.
    ...(config.credentials && endpoint === config.endpoint
      ? { credentials: config.credentials }
      : isLocalEndpoint(endpoint)
        ? { credentials: localCredentialProvider(endpoint as string) }
        : {}),
  });
  // useQueueUrlAsEndpoint=false keeps requests on the endpoint whatever host the queue URL names.
  const sqs = new SQSClient({
    ...common(serviceEndpoint(config, 'sqs')),
    requestHandler: handler(config.sqsRequestTimeoutMs ?? 25_000),
    useQueueUrlAsEndpoint: false,
  });
  const ddb = new DynamoDBClient({
    ...common(serviceEndpoint(config, 'dynamodb')),
    requestHandler: handler(config.requestTimeoutMs ?? 10_000),
  });
  const doc = DynamoDBDocumentClient.from(ddb, {
    marshallOptions: { removeUndefinedValues: true, convertClassInstanceToMap: false },
  });
  return { sqs, ddb, doc };
}

/** Closes the clients' sockets so a CLI process can exit promptly. */
export function destroyAwsClients(clients: AwsClients): void {
  clients.doc.destroy();
  clients.ddb.destroy();
  clients.sqs.destroy();
}
