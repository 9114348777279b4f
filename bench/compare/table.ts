import { formatRatio, formatSpread, renderTable } from '../report.ts';
import { PRICES } from './pricing.ts';
import { CONSUMER_LABELS, type ConsumerId, scenarioById } from './scenarios.ts';
import type { ConsumerSummary, TargetCheck } from './summary.ts';

/** What the report's header says about the session. */
export interface SessionFacts {
  readonly date: string;
  readonly emulator: string;
  readonly node: string;
  readonly cpus: number;
  readonly messages: number;
  readonly repeats: number;
  readonly timeoutSeconds: number;
}

const n0 = (v: number) => (Number.isFinite(v) ? v.toFixed(0) : '-');

function scenarioHeader(
  summaries: readonly ConsumerSummary[],
  scenario: string,
  facts: SessionFacts,
): string {
  const s = scenarioById(scenario);
  const first = summaries[0];
  return `${scenario}: ${s?.label ?? scenario} | ${first?.workers ?? '?'} worker${first?.workers === 1 ? '' : 's'} | ${facts.messages} messages | ${first?.runs ?? 0} run${first?.runs === 1 ? '' : 's'} each`;
}

function requestsLine(s: ConsumerSummary): string {
  const parts = Object.entries(s.requestsPerJob)
    .filter(([, v]) => v > 0)
    .map(([k, v]) => `${k} ${v.toFixed(2)}`);
  return `    ${s.consumer}: ${parts.join(', ')}`;
}

/** Notable consumer decisions and events: Powertools' errors, leaseq's skips and takeovers, kills. */
function notes(s: ConsumerSummary): string | undefined {
  const parts: string[] = [];
  if (s.kills.planned > 0) parts.push(`kills ${s.kills.happened}/${s.kills.planned}`);
  if (s.timedOut > 0) parts.push(`${s.timedOut} run(s) timed out`);
  if (s.deadLetters > 0) parts.push(`${s.deadLetters} dead letters`);
  const interesting =
    s.consumer === 'powertools'
      ? Object.entries(s.stats)
      : Object.entries(s.stats).filter(([k]) =>
          [
            'DuplicateSkipped',
            'CacheHit',
            'LeaseExpired',
            'OwnMessageEarly',
            'JobRetried',
            'failed',
          ].includes(k),
        );
  for (const [k, v] of interesting) if (v > 0) parts.push(`${k} ${v}`);
  return parts.length > 0 ? `    ${s.consumer}: ${parts.join(', ')}` : undefined;
}

/** The whole text report: one block per scenario, then capacity source, prices and targets. */
export function reportText(
  summaries: readonly ConsumerSummary[],
  targets: readonly TargetCheck[],
  facts: SessionFacts,
): string {
  const lines: string[] = [
    '',
    `leaseq side-by-side benchmark, ${facts.date}: ${facts.emulator}; Node ${facts.node}; ${facts.cpus} cores`,
    `Each figure: median over the runs (jobs/s with min-max); ratios are in-run (same round, same workload);`,
    `"per job" is per unique job; jobs/s counts every message, duplicates included; latency is enqueue to`,
    `effect; invocation timeout = receive visibility = ${facts.timeoutSeconds} s.`,
  ];
  const scenarios = [...new Set(summaries.map((s) => s.scenario))];
  const header = [
    'consumer',
    'jobs/s',
    'vs bare',
    'vs PT',
    'p50 ms',
    'p95 ms',
    'p99 ms',
    'WRU/job',
    'RRU/job',
    'SQS/job',
    '$/M total',
    'doubles',
    'missing',
  ];
  for (const scenario of scenarios) {
    const rows = summaries.filter((s) => s.scenario === scenario);
    lines.push('', scenarioHeader(rows, scenario, facts));
    lines.push(
      renderTable(
        header,
        rows.map((s) => [
          CONSUMER_LABELS[s.consumer],
          formatSpread(s.jobsPerSecond, 0),
          formatRatio(s.vsBare.median),
          formatRatio(s.vsPowertools.median),
          n0(s.latencyMs.p50.median),
          n0(s.latencyMs.p95.median),
          n0(s.latencyMs.p99.median),
          s.wruPerJob.median.toFixed(2),
          s.rruPerJob.median.toFixed(2),
          s.sqsRequestsPerJob.median.toFixed(3),
          s.cost.total.median.toFixed(2),
          String(s.doubleEffects.total),
          String(s.missingEffects),
        ]),
        header.map((_, i) => i > 0),
      ),
    );
    lines.push(
      renderTable(
        [
          '  cost and Lambda time',
          'Lambda ms/job',
          'invocations/job',
          '$ Lambda',
          '$ DynamoDB',
          '$ SQS',
          '$ total /M',
        ],
        rows.map((s) => [
          `  ${CONSUMER_LABELS[s.consumer]}`,
          s.lambdaMsPerJob.median.toFixed(2),
          s.invocationsPerJob.median.toFixed(3),
          s.cost.lambda.median.toFixed(2),
          s.cost.dynamodb.median.toFixed(2),
          s.cost.sqs.median.toFixed(2),
          s.cost.total.median.toFixed(2),
        ]),
        [false, true, true, true, true, true, true],
      ),
    );
    if (rows.some((s) => s.floorJobsPerSlot !== undefined)) {
      lines.push(
        renderTable(
          [
            '  latency model',
            'jobs/s/slot',
            'vs PT',
            'round trips',
            'floor',
            '% of floor',
            'DDB calls/job',
            'p50 ms',
            'p99 ms',
            'emulator ms/call',
            'drawn ms/call',
            'calls over draw',
          ],
          rows.map((s) => [
            `  ${CONSUMER_LABELS[s.consumer]}`,
            n0(s.jobsPerSlot.median),
            formatRatio(s.slotVsPowertools.median),
            String(s.roundTrips),
            n0(s.floorJobsPerSlot ?? Number.NaN),
            n0((100 * s.jobsPerSlot.median) / (s.floorJobsPerSlot ?? Number.NaN)),
            s.dynamodbRequestsPerJob.median.toFixed(2),
            n0(s.latencyMs.p50.median),
            n0(s.latencyMs.p99.median),
            s.emulator ? s.emulator.msPerCall.toFixed(1) : '-',
            s.emulator ? s.emulator.drawnPerCall.toFixed(1) : '-',
            s.emulator ? `${(100 * s.emulator.overDraw).toFixed(0)} %` : '-',
          ]),
          [false, true, true, true, true, true, true, true, true, true, true, true],
        ),
      );
    }
    lines.push('  requests per job by API:', ...rows.map(requestsLine));
    const noted = rows.map(notes).filter((l): l is string => l !== undefined);
    if (noted.length > 0) lines.push('  notes:', ...noted);
  }
  const reported = summaries.reduce((n, s) => n + s.capacitySource.reportedRequests, 0);
  const computed = summaries.reduce((n, s) => n + s.capacitySource.computedRequests, 0);
  const computedWru = summaries.reduce((n, s) => n + s.capacitySource.computedWru, 0);
  lines.push(
    '',
    `WRU/RRU: the emulator's ConsumedCapacity (ReturnConsumedCapacity=TOTAL on every worker request; MiniStack`,
    `sizes items by DynamoDB's rules) for ${reported} requests; refused conditional writes report none and were`,
    `computed by DynamoDB's rules (1 WRU per started KB of the item, 2x in a transaction): ${computed} requests, ${computedWru} WRU.`,
    `Prices: ${PRICES.region} on-demand as of ${PRICES.asOf}: DynamoDB $${PRICES.dynamodbPerMillionWru}/M WRU, ` +
      `$${PRICES.dynamodbPerMillionRru}/M RRU; SQS $${PRICES.sqsPerMillionRequests}/M requests; Lambda arm64 ` +
      `$${PRICES.lambdaArmPerGbSecond}/GB-s at ${PRICES.lambdaMemoryMb} MB, $${PRICES.lambdaPerMillionRequests}/M requests. ${PRICES.note}`,
    `Latency model (scenarios aws*): per-call AWS latency drawn from log-normals (bench/README.md, "The latency`,
    `model"); jobs/s/slot = messages per second of batch-handler time; floor = the most the design's sequential`,
    `DynamoDB round trips allow for that batch size (Monte Carlo over the same model); ratios in-run.`,
  );
  const fastNote = fastPathNote(summaries);
  if (fastNote) lines.push(fastNote);
  lines.push('', 'Targets (reported, not asserted):');
  for (const t of targets) {
    const mark = t.met === undefined ? '[n/a]   ' : t.met ? '[met]   ' : '[missed]';
    lines.push(`  ${mark} ${t.target}: ${t.measured}`);
  }
  lines.push('');
  return lines.join('\n');
}

/** Says so when the fast consumer made a claim per job: this build ignores `fastPath` and runs it leased. */
export function fastPathNote(summaries: readonly ConsumerSummary[]): string | undefined {
  const claims = (c: ConsumerId) =>
    summaries
      .filter((s) => s.consumer === c && s.scenario === 'dup0')
      .map((s) => s.requestsPerJob['DynamoDB.UpdateItem'] ?? 0)[0] ??
    summaries.filter((s) => s.consumer === c).map((s) => s.requestsPerJob['DynamoDB.UpdateItem'] ?? 0)[0];
  const fast = claims('fast');
  if (fast === undefined || fast < 0.9) return undefined;
  return (
    `Note: the fast-path consumer still made ${fast.toFixed(2)} claim UpdateItems per job: this leaseq build ignores ` +
    '`fastPath: true` and ran it leased; its figures are the leased path until the fast path is merged.'
  );
}
