// What the document client does to a request's values before anything is sent, and what DynamoDB refuses
// of them on arrival: the in-memory DynamoDB serves the values as given, so without this it would store
// what the real client refuses to marshall (an empty set, NaN, a number past Number.MAX_SAFE_INTEGER, a
// class instance) and numbers DynamoDB refuses (past 38 digits or its range).

import { marshall } from '@aws-sdk/util-dynamodb';
import { checkNumberText } from '../dynamodb-numbers.ts';
import { asSdkError } from './errors.ts';

/** The document client's marshalling options (leaseq's clients and InMemoryDynamoDb's constructor). */
const OPTIONS = { removeUndefinedValues: true, convertClassInstanceToMap: false } as const;

type Input = Record<string, unknown>;

/**
 * Throws what the document client throws (a plain Error) for a value it cannot marshall, or DynamoDB's
 * ValidationException for a number it refuses, for every attribute value the command carries.
 */
export function checkValues(input: Input): void {
  checkRequest(input);
  for (const entry of (input.TransactItems as Input[] | undefined) ?? []) {
    for (const action of Object.values(entry)) if (action) checkRequest(action as Input);
  }
  const requests = input.RequestItems as Record<string, { Keys?: Input[] }> | undefined;
  for (const request of Object.values(requests ?? {})) {
    for (const key of request.Keys ?? []) checkMap(key);
  }
}

function checkRequest(input: Input): void {
  for (const field of ['Item', 'Key', 'ExpressionAttributeValues', 'ExclusiveStartKey']) {
    const map = input[field];
    if (map !== undefined && map !== null) checkMap(map as Input);
  }
}

function checkMap(map: Input): void {
  // Most requests hold only strings, safe integers, booleans and plain maps and lists of them, which the
  // client marshalls and DynamoDB takes as they are: only anything else goes through marshall (the
  // largest cost of a request here, measured by bench:cpu).
  if (isPlain(map)) return;
  const typed = marshall(map, OPTIONS);
  try {
    for (const v of Object.values(typed)) checkTyped(v);
  } catch (error) {
    throw asSdkError(error);
  }
}

function isPlain(v: unknown): boolean {
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return Number.isSafeInteger(v);
    case 'object': {
      if (v === null) return true;
      if (Array.isArray(v)) return v.every(isPlain);
      const proto = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) return false;
      // marshall tells a map by its `constructor`: an own field of that name makes it a class instance.
      if (Object.hasOwn(v, 'constructor')) return false;
      for (const key in v) if (!isPlain((v as Input)[key])) return false;
      return true;
    }
    default:
      return false;
  }
}

function checkTyped(v: unknown): void {
  if (typeof v !== 'object' || v === null) return;
  const a = v as { N?: string; NS?: string[]; L?: unknown[]; M?: Record<string, unknown> };
  if (a.N !== undefined) checkNumberText(a.N);
  else if (a.NS !== undefined) for (const n of a.NS) checkNumberText(n);
  else if (a.L !== undefined) for (const e of a.L) checkTyped(e);
  else if (a.M !== undefined) for (const e of Object.values(a.M)) checkTyped(e);
}
