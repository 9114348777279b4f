/**
 * Which endpoint each service leaseq calls uses, when a service's own variable (`AWS_ENDPOINT_URL_SQS`,
 * ...) sends it elsewhere than the target: one line per service, printed under the target line.
 */
import {
  type AwsClients,
  type AwsService,
  createAwsClients,
  SERVICE_ENDPOINT_VARIABLES,
  serviceEndpointsFromEnv,
} from '../shared/aws/clients.ts';
import { endpointText } from '../shared/aws/endpoint-text.ts';

/** The services a command's clients call: the queue and the tables. */
const SHOWN: readonly AwsService[] = ['sqs', 'dynamodb'];

/**
 * `sqs:      http://127.0.0.1:4599 (AWS_ENDPOINT_URL_SQS)` and one line for each other service, or none
 * when no service has an endpoint of its own (the target line says it all then).
 */
export function serviceEndpointLines(
  endpoint: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
  targetName = 'the target',
): string[] {
  const own = serviceEndpointsFromEnv(env);
  const services = [...SHOWN, ...(Object.keys(own) as AwsService[]).filter((s) => !SHOWN.includes(s))];
  if (!services.some((service) => own[service] !== undefined)) return [];
  const width = Math.max(...services.map((service) => service.length)) + 1;
  return services.map((service) => {
    const where = own[service]
      ? `${endpointText(own[service])} (${SERVICE_ENDPOINT_VARIABLES[service]})`
      : `${endpoint ? endpointText(endpoint) : 'AWS'} (${targetName})`;
    return `${`${service}:`.padEnd(width)} ${where}`;
  });
}

/**
 * The clients of a command's target: its endpoint, with a service's own variable (AWS_ENDPOINT_URL_SQS,
 * ...) over it for that service as in the SDK (on AWS none is set: the target refuses them).
 */
export function targetClients(
  choice: { readonly kind: string; readonly endpoint: string | undefined; readonly region: string },
  env: NodeJS.ProcessEnv,
): AwsClients {
  const { endpoint, region } = choice;
  // A person waits at the prompt: an endpoint that accepts but never answers is reported in seconds.
  return createAwsClients({
    region,
    ...(endpoint ? { endpoint } : {}),
    ...(choice.kind === 'aws' ? {} : { endpoints: serviceEndpointsFromEnv(env) }),
    maxAttempts: 2,
    requestTimeoutMs: 5000,
    sqsRequestTimeoutMs: 5000,
  });
}
