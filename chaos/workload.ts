import { planWorkload, type Workload } from '../examples/ledger/demo/workload.ts';
import type { OutgoingMessage } from '../examples/ledger/generate.ts';
import { seededRandom } from '../examples/ledger/generate.ts';
import { makeEnvelope } from '../shared/core/contract/envelope.ts';
import { FAST_TYPES, LOCKED_TRANSFER, TENANT_CREDIT, TENANT_LIMIT } from './jobs.ts';

/** The chaos mix on top of the demo's workload planner. */
export interface ChaosMix {
  readonly jobs: number;
  readonly seed: string;
  readonly leaseMs: number;
  /** Share of the plain transfers turned into named-lease transfers. @default 0.15 */
  readonly lockedRate?: number;
  /**
   * Share of the other credits and transfers turned to the fast path (`chaos.fastCredit`,
   * `chaos.fastTransfer`); of the poison and the slow jobs, every other one. Crashing transfers stay
   * leased: their point is the checkpoint between debit and credit. @default 0.3
   */
  readonly fastRate?: number;
  /**
   * Share of the jobs that are `chaos.tenantCredit` (per-tenant concurrency limit), taken from the
   * ledger jobs so the run's size stays `jobs`; 0 leaves the tenant mix out. @default 0.1
   */
  readonly tenantRate?: number;
}

/** One `chaos.tenantCredit` job: whose, which account it credits, how much. */
export interface TenantJob {
  readonly tenant: string;
  readonly account: string;
  readonly amount: number;
}

/**
 * The tenant mix: one tenant's burst (BURST_SHARE of the tenant jobs, sent in one block) and a few
 * other tenants spread through the stream, each tenant's jobs limited to `limit` runs at once.
 */
export interface TenantMix {
  readonly limit: number;
  readonly burstTenant: string;
  /** Tenant jobs by dedup key. */
  readonly jobs: ReadonlyMap<string, TenantJob>;
  /** Unique jobs per tenant. */
  readonly perTenant: Readonly<Record<string, number>>;
}

/** The burst tenant's share of the tenant jobs. */
const BURST_SHARE = 2 / 3;
/** Tenants besides the burst one. */
const OTHER_TENANTS = 3;

export interface ChaosWorkload extends Workload {
  /** Unique jobs that run as `chaos.lockedTransfer`. */
  readonly locked: number;
  /** Unique jobs that run on the fast path. */
  readonly fast: number;
  /** Dedup keys of the jobs whose effects include a `debit` step (checkpointed, or folded on the fast path). */
  readonly transfers: ReadonlySet<string>;
  readonly tenants: TenantMix;
}

type Envelope = Record<string, unknown>;

/**
 * The demo's workload (duplicates, flaky, slow, crashing and poison jobs, one non-JSON body), scaled to the
 * run, with a share of its transfers turned into `chaos.lockedTransfer` and a share of its credits and
 * transfers turned to the fast path (same payloads, so the expected balances stand). Deterministic for a
 * seed: the run id is derived from it, and so is every choice; a job is turned by its key alone, so a
 * duplicate is turned exactly as its original.
 */
export function planChaosWorkload(runId: string, mix: ChaosMix): ChaosWorkload {
  const tenantJobs = Math.round(mix.jobs * (mix.tenantRate ?? 0.1));
  const n = mix.jobs - tenantJobs;
  const random = seededRandom(mix.seed);
  const base = planWorkload(runId, {
    jobs: n,
    accounts: Math.max(10, Math.min(50, Math.round(n / 100))),
    duplicateRate: 0.2,
    flakyRate: 0.05,
    slow: Math.max(3, Math.round(n / 500)),
    slowMs: mix.leaseMs * 2,
    poison: Math.max(3, Math.round(n / 1000)),
    crashes: Math.max(3, Math.round(n / 500)),
    random,
  });
  const rates = { locked: mix.lockedRate ?? 0.15, fast: mix.fastRate ?? 0.3 };
  const envelopes = base.messages.map((m) => parse(m.body));
  const fastSpecials = everyOther(envelopes, rates.locked);
  const turnedTo = new Map<string, string>();
  const transfers = new Set<string>();
  const messages = base.messages.map((message, i): OutgoingMessage => {
    const envelope = envelopes[i];
    if (envelope === undefined) return message;
    const key = String(envelope.dedupKey);
    if (envelope.type === 'ledger.transfer') transfers.add(key);
    const type = chaosType(envelope, key, rates, fastSpecials);
    if (type === undefined) return message;
    turnedTo.set(key, type);
    return { ...message, body: JSON.stringify({ ...envelope, type }) };
  });
  const turned = [...turnedTo.values()];
  const tenants = planTenants(runId, tenantJobs, mix, seededRandom(`${mix.seed}/tenants`));
  return {
    ...base,
    messages: tenants.place(messages),
    expectedDone: [...base.expectedDone, ...tenants.mix.jobs.keys()],
    counts: {
      ...base.counts,
      unique: base.counts.unique + tenantJobs,
      duplicates: base.counts.duplicates + tenants.duplicates,
    },
    locked: turned.filter((t) => t === LOCKED_TRANSFER).length,
    fast: turned.filter((t) => t !== LOCKED_TRANSFER).length,
    transfers,
    tenants: tenants.mix,
  };
}

/**
 * `count` tenant jobs: BURST_SHARE of them for tenant `t0`, the rest spread over OTHER_TENANTS tenants,
 * each crediting its tenant's own account (outside the demo's accounts, so its balances stand). Most work
 * 50-250 ms (a limited tenant's jobs run two at a time: its burst is the run's tail, so they are short); a few work past the lease (the slot's heartbeat must keep it), 5% fail once first, 20% are
 * sent twice. `place` puts the burst in one block within the first 5% of the stream and the rest at
 * random places.
 */
function planTenants(runId: string, count: number, mix: ChaosMix, random: () => number) {
  const burstTenant = 't0';
  const burst = Math.round(count * BURST_SHARE);
  const jobs = new Map<string, TenantJob>();
  const perTenant: Record<string, number> = {};
  const burstMessages: OutgoingMessage[] = [];
  const spread: OutgoingMessage[] = [];
  let duplicates = 0;
  const long = Math.max(2, Math.round(count / 100));
  for (let i = 0; i < count; i++) {
    const tenant = i < burst ? burstTenant : `t${1 + ((i - burst) % OTHER_TENANTS)}`;
    const seq = (perTenant[tenant] ?? 0) + 1;
    perTenant[tenant] = seq;
    const dedupKey = `${runId}-${tenant}-${String(seq).padStart(5, '0')}`;
    const job: TenantJob = {
      tenant,
      account: `${runId}-tenant-${tenant}`,
      amount: 1 + Math.floor(random() * 50),
    };
    jobs.set(dedupKey, job);
    const workMs =
      i % Math.ceil(count / long) === 0 ? Math.round(mix.leaseMs * 1.5) : 50 + Math.floor(random() * 200);
    const simulate = random() < 0.05 ? { simulate: { failTimes: 1 } } : {};
    const body = JSON.stringify(
      makeEnvelope({ id: dedupKey, dedupKey, type: TENANT_CREDIT, payload: { ...job, workMs, ...simulate } }),
    );
    const into = tenant === burstTenant ? burstMessages : spread;
    into.push({ body, dedupKey });
    if (random() < 0.2) {
      duplicates += 1;
      into.push({ body, dedupKey, duplicate: true });
    }
  }
  const place = (messages: readonly OutgoingMessage[]): OutgoingMessage[] => {
    const out = [...messages];
    for (const message of spread) out.splice(Math.floor(random() * (out.length + 1)), 0, message);
    // Near the head of the stream: the queue is served roughly in order, so a burst placed later would
    // only start once the workers reached it and, two runs at a time, become the run's tail.
    out.splice(Math.floor(random() * (out.length / 20)), 0, ...burstMessages);
    return out;
  };
  const mixOut: TenantMix = { limit: TENANT_LIMIT, burstTenant, jobs, perTenant };
  return { mix: mixOut, duplicates, place };
}

/** The type a ledger job runs as in the chaos run, when not its own. */
function chaosType(
  envelope: Envelope,
  key: string,
  rates: { readonly locked: number; readonly fast: number },
  fastSpecials: ReadonlySet<string>,
): string | undefined {
  const type = envelope.type;
  if (type !== 'ledger.credit' && type !== 'ledger.transfer') return undefined;
  const draw = seededRandom(key)();
  if (type === 'ledger.transfer' && draw < rates.locked) return LOCKED_TRANSFER;
  const kind = specialKind(envelope);
  if (kind === 'crash') return undefined;
  // A transfer's draw below `locked` made it a named-lease transfer: the fast share is the next slice.
  const from = type === 'ledger.transfer' ? rates.locked : 0;
  const fast = kind === undefined ? draw >= from && draw < from + rates.fast : fastSpecials.has(key);
  return fast ? FAST_TYPES[type] : undefined;
}

/** The demo's special jobs, by their `simulate` payload (flaky jobs are many: they go by the rate). */
function specialKind(envelope: Envelope): 'crash' | 'poison' | 'slow' | undefined {
  const payload = envelope.payload as { simulate?: Record<string, unknown> } | undefined;
  const simulate = payload?.simulate;
  if (simulate?.crashAfterStep !== undefined) return 'crash';
  if (simulate?.permanent === true) return 'poison';
  if (simulate?.sleepMs !== undefined) return 'slow';
  return undefined;
}

/**
 * Every other poison and every other slow job (in key order, the first of each included), not counting
 * the named-lease transfers: so each kind also runs on the fast path, however few there are.
 */
function everyOther(envelopes: readonly (Envelope | undefined)[], lockedRate: number): ReadonlySet<string> {
  const byKind = new Map<string, Set<string>>();
  for (const envelope of envelopes) {
    const kind = envelope && specialKind(envelope);
    if (!envelope || (kind !== 'poison' && kind !== 'slow')) continue;
    const key = String(envelope.dedupKey);
    if (envelope.type === 'ledger.transfer' && seededRandom(key)() < lockedRate) continue;
    byKind.set(kind, (byKind.get(kind) ?? new Set()).add(key));
  }
  const chosen = new Set<string>();
  for (const keys of byKind.values()) {
    [...keys].sort().forEach((key, i) => {
      if (i % 2 === 0) chosen.add(key);
    });
  }
  return chosen;
}

function parse(body: string): Envelope | undefined {
  try {
    const value: unknown = JSON.parse(body);
    return typeof value === 'object' && value !== null ? (value as Envelope) : undefined;
  } catch {
    return undefined;
  }
}
