import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { rateLimits } from '../../../../shared/core/model/rate-limit.ts';
import { JobRegistry } from '../../../../shared/core/model/registry.ts';
import { rateItemKey } from '../../../../shared/core/pipeline/rate-limit.ts';
import { ConfigError } from '../../../../shared/errors.ts';

const noop = async () => undefined;
const job = (type: string, rateLimit: unknown) =>
  ({ type, payload: z.object({}), rateLimit, run: noop }) as never;

describe('Option: rateLimit', () => {
  it('accepts one limit or a list, type-wide or per key', () => {
    // Act
    const registry = JobRegistry.of([
      job('a.one', { limit: 5, perSeconds: 1 }),
      job('a.two', [
        { limit: 10, perSeconds: 0.5, key: (p: { t: string }) => p.t },
        { limit: 1000, perSeconds: 86_400, name: 'a.daily' },
      ]),
    ]);

    // Assess
    const two = registry.get('a.two');
    expect(two && rateLimits(two).map((l) => l.limit)).toEqual([10, 1000]);
  });

  it.each([
    [
      { limit: 0, perSeconds: 1 },
      'job type a.bad: rateLimit.limit must be a whole number from 1 to 100000, received 0',
    ],
    [{ limit: 2.5, perSeconds: 1 }, 'rateLimit.limit must be a whole number from 1 to 100000, received 2.5'],
    [{ limit: 100_001, perSeconds: 1 }, 'received 100001'],
    [
      { limit: '5', perSeconds: 1 },
      'rateLimit.limit must be a whole number from 1 to 100000, received string',
    ],
    [
      { limit: 5, perSeconds: 0 },
      'rateLimit.perSeconds must be a number of seconds above 0 and at most 86400 (a day), received 0',
    ],
    [{ limit: 5, perSeconds: -1 }, 'received -1'],
    [{ limit: 5, perSeconds: Number.POSITIVE_INFINITY }, 'received Infinity'],
    [
      { limit: 5 },
      'rateLimit.perSeconds must be a number of seconds above 0 and at most 86400 (a day), received undefined',
    ],
    [
      { limit: 5, perSeconds: 1, key: 'tenantId' },
      'rateLimit.key must be a function (payload) => string, received string',
    ],
    [{ limit: 5, perSeconds: 1, name: 'has space' }, 'rateLimit.name "has space" is not valid'],
    [null, 'rateLimit must be an object { limit, perSeconds, key?, name? }, received object'],
    [[], 'rateLimit must be one limit or a list of 1 to 4, received 0'],
    [
      [
        { limit: 1, perSeconds: 1 },
        { limit: 100, perSeconds: 60 },
      ],
      'job type a.bad: rateLimit: two limits would share the permits named a.bad; give each limit its own name',
    ],
    [[{ limit: 1, perSeconds: 1 }, 7], 'job type a.bad: rateLimit[1] must be an object'],
  ])('refuses %j at registry build: %s', (option, said) => {
    expect(() => JobRegistry.of([job('a.bad', option)])).toThrow(ConfigError);
    expect(() => JobRegistry.of([job('a.bad', option)])).toThrow(said);
  });

  it('lets types share a limit by name only when they declare it the same', () => {
    expect(() =>
      JobRegistry.of([
        job('a.x', { limit: 5, perSeconds: 1, name: 'mail-api' }),
        job('a.y', { limit: 5, perSeconds: 1, name: 'mail-api' }),
      ]),
    ).not.toThrow();
    expect(() =>
      JobRegistry.of([
        job('a.x', { limit: 5, perSeconds: 1, name: 'mail-api' }),
        job('a.y', { limit: 6, perSeconds: 1, name: 'mail-api' }),
      ]),
    ).toThrow(
      'job type a.y: rateLimit: the rate limit named mail-api is 5 per 1 s elsewhere; a shared limit must be declared the same everywhere',
    );
  });

  it('refuses a permit name holding ":k:", with which a key value could name another limit\'s item', () => {
    // Prepare: the collision such a name allows (a tenant "acme:*" would spend the other type's permits).
    const keyed = { limit: 5, perSeconds: 1, key: (p: unknown) => (p as { t: string }).t };
    const whole = { limit: 100, perSeconds: 1 };
    expect(rateItemKey('crm', keyed, { t: 'acme:*' })).toBe(rateItemKey('crm:k:acme', whole, {}));

    // Act and assess: whether the name is the type's or the limit's own.
    for (const definitions of [
      [job('crm', keyed), job('crm:k:acme', whole)],
      [job('crm', keyed), job('other', { ...whole, name: 'crm:k:acme' })],
    ]) {
      expect(() => JobRegistry.of(definitions)).toThrow(ConfigError);
      expect(() => JobRegistry.of(definitions)).toThrow('":k:"');
    }
  });
});
