// A ProjectionExpression's document paths (`a, #b.c, l[1]`) and the part of an item they name, as
// DynamoDB projects: the maps on the way kept with only the named members, a list with only the named
// elements (in index order), missing paths left out.

import { Parser } from '../dynamodb-expression-parser.ts';
import type { Item, PathPart, Placeholders } from '../dynamodb-expression-types.ts';
import { copy } from './values.ts';

/** The paths of a ProjectionExpression, refused as DynamoDB refuses a malformed one. */
export function projectionPaths(expression: string, placeholders: Placeholders): PathPart[][] {
  const parser = new Parser(expression, placeholders, 'condition');
  const paths = [parser.path()];
  while (!parser.done()) {
    parser.expect(',');
    paths.push(parser.path());
  }
  return paths;
}

/** The part of `item` the paths name (copies). */
export function projectPaths(item: Item, paths: readonly (readonly PathPart[])[]): Item {
  const out: Item = {};
  // List elements gather by list, then take their index order (a projection's list is compacted).
  const lists = new Map<unknown[], Map<number, unknown>>();
  for (const path of paths) {
    let from: unknown = item;
    for (const part of path) {
      from = from === undefined ? undefined : step(from, part);
    }
    if (from === undefined) continue;
    let to: unknown = out;
    let source: unknown = item;
    for (let i = 0; i < path.length; i++) {
      const part = path[i] as PathPart;
      const last = i === path.length - 1;
      const next = step(source, part);
      source = next;
      const value = last ? copy(next) : Array.isArray(next) ? [] : {};
      if (typeof part === 'number') {
        const slots = lists.get(to as unknown[]) ?? new Map<number, unknown>();
        lists.set(to as unknown[], slots);
        if (!slots.has(part)) slots.set(part, value);
        to = slots.get(part);
      } else {
        const map = to as Item;
        if (map[part] === undefined || last) map[part] = value;
        to = map[part];
      }
    }
  }
  for (const [list, slots] of lists) {
    for (const index of [...slots.keys()].sort((a, b) => a - b)) list.push(slots.get(index));
  }
  return out;
}

function step(at: unknown, part: PathPart): unknown {
  if (typeof part === 'number') return Array.isArray(at) ? at[part] : undefined;
  if (typeof at !== 'object' || at === null || Array.isArray(at) || at instanceof Set) return undefined;
  if (at instanceof Uint8Array) return undefined;
  return (at as Item)[part];
}
