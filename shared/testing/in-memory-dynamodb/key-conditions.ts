// A Query's KeyConditionExpression against the key schema it queries, refused as DynamoDB refuses it:
// the partition key by `=`, at most one condition on the sort key (a comparison, BETWEEN or begins_with),
// nothing else. The engine would otherwise evaluate any condition as a filter over every item.

import { type Condition, validationException } from '../dynamodb-expressions.ts';
import type { KeyPart } from './tables.ts';

export function checkKeyCondition(
  condition: Condition,
  partitionKey: KeyPart,
  sortKey: KeyPart | undefined,
): void {
  const parts: Condition[] = [];
  const flatten = (c: Condition) => {
    if (c.kind === 'and') {
      flatten(c.left);
      flatten(c.right);
    } else parts.push(c);
  };
  flatten(condition);
  let partition = false;
  let sort = false;
  for (const part of parts) {
    const name = subjectOf(part);
    if (name === partitionKey.name && part.kind === 'compare' && part.op === '=' && !partition) {
      partition = true;
    } else if (sortKey && name === sortKey.name && !sort && part.kind !== 'in') {
      if (part.kind === 'compare' && part.op === '<>') throw invalidOperator('<>');
      sort = true;
    } else if (name === undefined) {
      throw invalidOperator(operatorOf(part));
    } else {
      throw validationException(`Query condition missed key schema element: ${name}`);
    }
  }
  if (!partition) {
    throw validationException(`Query condition missed key schema element: ${partitionKey.name}`);
  }
}

/** The top-level attribute a key condition's part is on, if it is a part a key condition may have. */
function subjectOf(c: Condition): string | undefined {
  const operand =
    c.kind === 'compare' || c.kind === 'between'
      ? c.kind === 'compare'
        ? c.left
        : c.subject
      : c.kind === 'fn' && c.call.fn === 'begins_with'
        ? c.call.args[0]
        : undefined;
  if (operand?.kind !== 'path' || operand.path.length !== 1) return undefined;
  return String(operand.path[0]);
}

function operatorOf(c: Condition): string {
  if (c.kind === 'or') return 'OR';
  if (c.kind === 'not') return 'NOT';
  if (c.kind === 'in') return 'IN';
  if (c.kind === 'fn') return c.call.fn;
  return c.kind === 'compare' ? c.op : c.kind.toUpperCase();
}

function invalidOperator(op: string): Error {
  return validationException(`Invalid operator used in KeyConditionExpression: ${op}`);
}
