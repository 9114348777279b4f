// The `rateLimit` option of a job definition: its checks at registry build, and the permit item each
// limit takes from (`rate:<name or type>:<scope>` on the leases table).
import { ConfigError } from '../../errors.ts';
import type { AnyJobDefinition, RateLimit } from './job-definition.ts';

/** Most starts one rate limit may allow per window: its items (decisions/rate-shards.ts) log each start within the window. */
export const MAX_RATE_LIMIT = 100_000;
/** Longest window (seconds): a day. */
export const MAX_RATE_WINDOW = 86_400;
/** Most rate limits one type may declare: each costs a write per job. */
const MAX_RATE_LIMITS = 4;
const NAME = /^[A-Za-z0-9._:-]{1,128}$/;

/** The limits of a definition's `rateLimit` option, as a list (none when unset). */
export function rateLimits(definition: AnyJobDefinition): readonly RateLimit[] {
  const option: unknown = definition.rateLimit;
  if (option === undefined) return [];
  return Array.isArray(option) ? option : [option as RateLimit];
}

/** The name a limit's permit items carry: its `name`, else the job type. */
export function rateLimitName(type: string, limit: RateLimit): string {
  return limit.name ?? type;
}

/**
 * Checks a definition's `rateLimit`. Two limits of one type must differ in name (each has its own item),
 * and a name shared with another type must mean the same limit (`known`: name -> "limit/perSeconds").
 * @throws ConfigError naming the type and the limit.
 */
export function assertRateLimit(type: string, option: unknown, known: Map<string, string>): void {
  if (option === undefined) return;
  const limits: unknown[] = Array.isArray(option) ? option : [option];
  const where = `job type ${type}: rateLimit`;
  if (limits.length === 0 || limits.length > MAX_RATE_LIMITS) {
    throw new ConfigError(
      `${where} must be one limit or a list of 1 to ${MAX_RATE_LIMITS}, received ${limits.length}`,
    );
  }
  const names = new Set<string>();
  const shapes = new Map<string, string>();
  for (const [i, entry] of limits.entries()) {
    const at = limits.length > 1 ? `${where}[${i}]` : where;
    if (typeof entry !== 'object' || entry === null) {
      throw new ConfigError(
        `${at} must be an object { limit, perSeconds, key?, name? }, received ${typeof entry}`,
      );
    }
    const { limit, perSeconds, key, name } = entry as Record<string, unknown>;
    if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_RATE_LIMIT) {
      throw new ConfigError(
        `${at}.limit must be a whole number from 1 to ${MAX_RATE_LIMIT}, received ${typeof limit === 'number' ? limit : typeof limit}`,
      );
    }
    if (
      typeof perSeconds !== 'number' ||
      !Number.isFinite(perSeconds) ||
      perSeconds <= 0 ||
      perSeconds > MAX_RATE_WINDOW
    ) {
      throw new ConfigError(
        `${at}.perSeconds must be a number of seconds above 0 and at most ${MAX_RATE_WINDOW} (a day), received ${typeof perSeconds === 'number' ? perSeconds : typeof perSeconds}`,
      );
    }
    if (key !== undefined && typeof key !== 'function') {
      throw new ConfigError(`${at}.key must be a function (payload) => string, received ${typeof key}`);
    }
    if (name !== undefined && (typeof name !== 'string' || !NAME.test(name))) {
      throw new ConfigError(
        `${at}.name ${JSON.stringify(name)} is not valid; expected 1-128 letters, digits or . _ : -`,
      );
    }
    const itemName = (name as string | undefined) ?? type;
    // Items are `rate:<name>:*` and `rate:<name>:k:<key>`: with ":k:" in a name, a key value of another
    // limit (`<rest>:*`, from a payload) would name this limit's item and spend its permits.
    if (itemName.includes(':k:')) {
      throw new ConfigError(
        `${at}: the permits' name ${itemName} holds ":k:", which a key value of another limit could reach; give the limit a name without it`,
      );
    }
    if (names.has(itemName)) {
      throw new ConfigError(
        `${where}: two limits would share the permits named ${itemName}; give each limit its own name`,
      );
    }
    names.add(itemName);
    const shape = `${limit} per ${perSeconds} s`;
    const before = known.get(itemName);
    if (before !== undefined && before !== shape) {
      throw new ConfigError(
        `${at}: the rate limit named ${itemName} is ${before} elsewhere; a shared limit must be declared the same everywhere`,
      );
    }
    shapes.set(itemName, shape);
  }
  for (const [itemName, shape] of shapes) known.set(itemName, shape);
}
