import type { Message } from '@aws-sdk/client-sqs';
import type { SQSMessageAttributes, SQSRecord, SQSRecordAttributes } from 'aws-lambda';
import { parseQueueUrl } from '../aws/queue-url.ts';

/**
 * Turns a received SQS message into the record shape Lambda's SQS event source mapping delivers, so
 * local workers run exactly the handler Lambda runs.
 */
export function toSqsRecord(message: Message, queueArn: string, region: string): SQSRecord {
  const a = message.Attributes ?? {};
  const attributes: SQSRecordAttributes = {
    ApproximateReceiveCount: a.ApproximateReceiveCount ?? '1',
    SentTimestamp: a.SentTimestamp ?? String(Date.now()),
    SenderId: a.SenderId ?? 'local',
    ApproximateFirstReceiveTimestamp: a.ApproximateFirstReceiveTimestamp ?? String(Date.now()),
    ...(a.MessageGroupId ? { MessageGroupId: a.MessageGroupId } : {}),
    ...(a.MessageDeduplicationId ? { MessageDeduplicationId: a.MessageDeduplicationId } : {}),
    ...(a.SequenceNumber ? { SequenceNumber: a.SequenceNumber } : {}),
    ...(a.AWSTraceHeader ? { AWSTraceHeader: a.AWSTraceHeader } : {}),
  };
  const messageAttributes: SQSMessageAttributes = {};
  for (const [name, value] of Object.entries(message.MessageAttributes ?? {})) {
    messageAttributes[name] = {
      dataType: value.DataType ?? 'String',
      ...(value.StringValue === undefined ? {} : { stringValue: value.StringValue }),
      ...(value.BinaryValue === undefined
        ? {}
        : { binaryValue: Buffer.from(value.BinaryValue).toString('base64') }),
    };
  }
  return {
    messageId: message.MessageId ?? '',
    receiptHandle: message.ReceiptHandle ?? '',
    body: message.Body ?? '',
    attributes,
    messageAttributes,
    md5OfBody: message.MD5OfBody ?? '',
    eventSource: 'aws:sqs',
    eventSourceARN: queueArn,
    awsRegion: region,
  };
}

/**
 * The queue's ARN from its URL (`<endpoint>/<account>/<name>`, the form SQS and its emulators use, any host
 * shape: {@link parseQueueUrl}), as the event source's records carry it. Falls back to a placeholder account
 * when the URL has no account part.
 */
export function queueArnFromUrl(queueUrl: string, region: string): string {
  const { account, name } = parseQueueUrl(queueUrl);
  return `arn:aws:sqs:${region}:${account ?? '000000000000'}:${name}`;
}
