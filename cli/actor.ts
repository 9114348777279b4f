/**
 * Who acts, for the history events a cancel or a redrive writes (`by`): the name the operator gives
 * (`--actor`), else on AWS the caller's identity from STS (an ARN: what the credentials prove, not what a
 * shell says), else user@host. On AWS a given name keeps the ARN beside it.
 */
import { GetCallerIdentityCommand, STSClient } from '@aws-sdk/client-sts';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { OpsError } from '../shared/ops/ops-errors.ts';
import { operatorIdentity } from './commands/redrive-input.ts';
import { note } from './format.ts';

/** Longest `--actor`: the event keeps 240 characters, and an ARN may need to stand beside it. */
export const ACTOR_MAX = 100;

/** The `--actor` a person may give: 1-100 printable characters (it reaches terminals and pages). */
export function checkActor(actor: string): string {
  const trimmed = actor.trim();
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (trimmed === '' || trimmed.length > ACTOR_MAX || /[\u0000-\u001f\u007f-\u009f]/.test(trimmed)) {
    throw new OpsError(`--actor must be 1-${ACTOR_MAX} printable characters (${actor.length} given)`);
  }
  return trimmed;
}

/** The caller's ARN on AWS (STS GetCallerIdentity), or undefined when STS does not answer. */
async function callerArn(region: string): Promise<string | undefined> {
  const sts = new STSClient({
    region,
    maxAttempts: 2,
    requestHandler: new NodeHttpHandler({ connectionTimeout: 3000, requestTimeout: 5000 }),
  });
  try {
    return (await sts.send(new GetCallerIdentityCommand({}))).Arn;
  } catch {
    return undefined;
  } finally {
    sts.destroy();
  }
}

/**
 * The actor a command records: `--actor`, else the STS caller on AWS, else user@host (`$USER` when the
 * process has no passwd entry).
 */
export async function resolveActor(
  flag: string | undefined,
  target: { readonly kind: string; readonly region: string },
): Promise<string> {
  const given = flag === undefined ? undefined : checkActor(flag);
  if (target.kind !== 'aws') return given ?? operatorIdentity();
  const arn = await callerArn(target.region);
  if (arn === undefined) {
    note('STS did not say who the caller is: the history names the actor as user@host');
    return given ?? operatorIdentity();
  }
  return given === undefined ? arn : `${given} (${arn})`;
}
