// What a request answers beside its items: the attributes ReturnValues asks for and the ConsumedCapacity
// ReturnConsumedCapacity asks for, as DynamoDB shapes them.
import { type Item, updatePaths } from '../dynamodb-expressions.ts';
import { consumed } from './capacity.ts';
import { sdkValidationException } from './errors.ts';
import type { WriteKind } from './item-ops.ts';
import { copy, updatedAttributes } from './values.ts';

type Input = Record<string, unknown> & { readonly ReturnConsumedCapacity?: string };

export function capacity(
  input: Input,
  table: string,
  units: { readonly read?: number; readonly write?: number },
  index?: string,
): { ConsumedCapacity?: Record<string, unknown> } {
  const mode = input.ReturnConsumedCapacity;
  if (mode === undefined || mode === 'NONE') return {};
  return { ConsumedCapacity: consumed(table, units, mode, index) };
}

export function returnValues(
  mode: string | undefined,
  kind: WriteKind,
  old: Item | undefined,
  next: Item | undefined,
  input: Input,
): Item | undefined {
  switch (mode) {
    case undefined:
    case 'NONE':
      return undefined;
    case 'ALL_OLD':
      return old ? copy(old) : undefined;
    case 'ALL_NEW':
      if (kind !== 'update') throw sdkValidationException('ReturnValues can only be ALL_OLD or NONE');
      return next ? copy(next) : undefined;
    case 'UPDATED_OLD':
    case 'UPDATED_NEW':
      if (kind !== 'update') throw sdkValidationException('ReturnValues can only be ALL_OLD or NONE');
      return updatedAttributes(
        updatePaths(input.UpdateExpression as string, {
          names: input.ExpressionAttributeNames as Record<string, string> | undefined,
          values: input.ExpressionAttributeValues as Record<string, unknown> | undefined,
        }),
        (mode === 'UPDATED_OLD' ? old : next) ?? {},
      );
    default:
      throw sdkValidationException(
        `1 validation error detected: Value '${mode}' at 'returnValues' failed to satisfy constraint: Member must satisfy enum value set: [ALL_NEW, UPDATED_OLD, ALL_OLD, NONE, UPDATED_NEW]`,
      );
  }
}
