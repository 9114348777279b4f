// How a rate limit's sliding log is spread over items, pure. One DynamoDB partition serves 1,000 write
// units a second and an item cannot be split: a log of `limit` grants is about 10 bytes a grant, so a
// limit of 1,000 a second on one item would ask ~10,000 WRU a second of it. A limit whose single log
// would cost more than SHARD_BUDGET_WRU a second at full use is split into N shards, each an exact
// sliding log of its own with limit/N of the permits (the remainder spread one each over the first
// shards): every window holds at most the sum of the shards' limits, which is the limit. The precision
// lost: a take is refused when every shard it tried is full, though another may still have room.

/** Write units a second one shard's item may cost at the limit's full use (a partition serves 1,000). */
export const SHARD_BUDGET_WRU = 300;
/** Most grants one shard's log holds (about 10 KB): the most one item held before sharding. */
export const MAX_SHARD_GRANTS = 1000;
/** Most shards of one limit. */
export const MAX_RATE_SHARDS = 1000;
/** Bytes of a rate item besides its grants (key, version, token, TTL), a little generous. */
const ITEM_BASE_BYTES = 100;
/** Bytes one logged grant adds (an epoch-ms number in a list). */
const GRANT_BYTES = 10;

/** Write units of one take of a log of `grants` (the item rewritten whole). */
export function rateItemWru(grants: number): number {
  return Math.max(1, Math.ceil((ITEM_BASE_BYTES + GRANT_BYTES * grants) / 1024));
}

const cache = new Map<string, number>();

/**
 * The shards of a limit of `limit` per `perSeconds`: 1 (one exact log, as before sharding) while the
 * single item costs at most {@link SHARD_BUDGET_WRU} a second at full use and holds at most
 * {@link MAX_SHARD_GRANTS}; else the fewest shards whose items each stay within both (at most
 * {@link MAX_RATE_SHARDS}: past 300,000 permits a second the shards themselves exceed the budget).
 */
export function rateShards(limit: number, perSeconds: number): number {
  const id = `${limit}/${perSeconds}`;
  const known = cache.get(id);
  if (known !== undefined) return known;
  let shards = MAX_RATE_SHARDS;
  for (let per = Math.min(limit, MAX_SHARD_GRANTS); per >= 1; per -= 1) {
    if ((per / perSeconds) * rateItemWru(per) <= SHARD_BUDGET_WRU) {
      shards = Math.ceil(limit / per);
      break;
    }
    // Past this many a shard, fewer shards than the cap are no longer possible: stop searching.
    if (Math.ceil(limit / per) >= MAX_RATE_SHARDS) break;
  }
  shards = Math.min(Math.max(1, shards), MAX_RATE_SHARDS, limit);
  if (cache.size > 1000) cache.clear();
  cache.set(id, shards);
  return shards;
}

/** Shard `index`'s share of `limit` over `shards`: the shares add up to the limit exactly. */
export function shardLimit(limit: number, shards: number, index: number): number {
  return Math.floor(limit / shards) + (index < limit % shards ? 1 : 0);
}

/**
 * The item key of shard `index` of the rate item `key` (`rate:<name>:<scope>`): shard 0 is the item
 * itself (a limit that grows past one item keeps its log there), shard i `rate:#<i>:<name>:<scope>`
 * (a name holds no `#`, so no other limit's item can be named so).
 */
export function rateShardKey(key: string, index: number): string {
  if (index === 0) return key;
  return `${key.slice(0, 5)}#${index}:${key.slice(5)}`;
}

/** The rate item key a shard's key belongs to (the key itself when it is not a shard's). */
export function rateKeyOfShard(key: string): string {
  const match = /^rate:#\d+:/.exec(key);
  return match ? `rate:${key.slice(match[0].length)}` : key;
}
