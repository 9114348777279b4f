import type { SQSClient } from '@aws-sdk/client-sqs';

/** A request as the SDK signed it (its SigV4 signer, @smithy/signature-v4): headers and body. */
export interface SignedRequest {
  readonly headers: Record<string, string>;
  readonly payload: string;
}

/**
 * Runs `command` through `client` up to the wire and returns the signed request instead of sending it,
 * so a test can send it by hand: as signed, altered, or with other headers. `withoutLength` signs it
 * with no Content-Length, to be sent chunked.
 */
export async function captureSigned(
  client: SQSClient,
  // biome-ignore lint/suspicious/noExplicitAny: any SQS command; the client only needs to run it.
  command: any,
  withoutLength = false,
): Promise<SignedRequest> {
  let captured: SignedRequest | undefined;
  if (withoutLength) {
    client.middlewareStack.add(
      (next) => async (args) => {
        delete (args.request as { headers: Record<string, string> }).headers['content-length'];
        return next(args);
      },
      { step: 'build', priority: 'low', name: 'dropContentLength' },
    );
  }
  client.middlewareStack.add(
    () => async (args) => {
      const request = args.request as { headers: Record<string, string>; body?: string };
      captured = { headers: { ...request.headers }, payload: request.body ?? '' };
      throw new Error('captured, not sent');
    },
    { step: 'deserialize', priority: 'low', name: 'captureSignedRequest' },
  );
  await client.send(command).catch(() => undefined);
  if (!captured) throw new Error('the SDK sent no request to capture');
  return captured;
}
