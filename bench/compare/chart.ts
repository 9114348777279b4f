import type { Spread } from '../report.ts';
import { PRICES } from './pricing.ts';
import { CONSUMER_LABELS, type ConsumerId } from './scenarios.ts';
import type { ConsumerSummary } from './summary.ts';

/** Okabe-Ito colours (distinguishable with common colour-vision deficiencies). */
const COLOURS: Readonly<Record<ConsumerId, string>> = {
  bare: '#999999',
  powertools: '#E69F00',
  leased: '#0072B2',
  fast: '#009E73',
};

const WIDTH = 1100;
const PANEL_HEIGHT = 260;
const PANELS = 3;
const LEFT = 70;
const RIGHT = 20;

function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** An axis label: no trailing zeros, at most two decimals. */
function tick(v: number): string {
  return String(Number(v.toFixed(2)));
}

/** A round axis maximum at or above `value` (1, 2, 2.5 or 5 times a power of ten). */
export function niceMax(value: number): number {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

interface PanelSpec {
  readonly title: string;
  readonly unit: string;
  readonly value: (s: ConsumerSummary) => Spread;
  readonly digits: number;
  /** More for the hover text. */
  readonly detail?: (s: ConsumerSummary) => string;
}

function panel(
  top: number,
  spec: PanelSpec,
  summaries: readonly ConsumerSummary[],
  scenarios: readonly string[],
  consumers: readonly ConsumerId[],
): string[] {
  const out: string[] = [];
  const plotTop = top + 28;
  const plotHeight = PANEL_HEIGHT - 70;
  const plotWidth = WIDTH - LEFT - RIGHT;
  const max = niceMax(
    Math.max(...summaries.map((s) => (Number.isFinite(spec.value(s).max) ? spec.value(s).max : 0)), 0),
  );
  const y = (v: number) => plotTop + plotHeight - (v / max) * plotHeight;
  out.push(`<text x="${LEFT}" y="${top + 16}" class="title">${esc(spec.title)}</text>`);
  for (let i = 0; i <= 4; i++) {
    const v = (max * i) / 4;
    out.push(
      `<line x1="${LEFT}" x2="${WIDTH - RIGHT}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" class="grid"/>`,
      `<text x="${LEFT - 6}" y="${(y(v) + 4).toFixed(1)}" class="tick" text-anchor="end">${esc(tick(v))}</text>`,
    );
  }
  out.push(
    `<text x="14" y="${(plotTop + plotHeight / 2).toFixed(1)}" class="tick" transform="rotate(-90 14 ${(plotTop + plotHeight / 2).toFixed(1)})" text-anchor="middle">${esc(spec.unit)}</text>`,
  );
  const group = plotWidth / Math.max(1, scenarios.length);
  const bar = (group * 0.8) / Math.max(1, consumers.length);
  scenarios.forEach((scenario, g) => {
    const x0 = LEFT + g * group + group * 0.1;
    consumers.forEach((consumer, c) => {
      const s = summaries.find((x) => x.scenario === scenario && x.consumer === consumer);
      if (!s) return;
      const v = spec.value(s);
      if (!Number.isFinite(v.median)) return;
      const x = x0 + c * bar;
      const h = Math.max(0, plotTop + plotHeight - y(v.median));
      out.push(
        `<rect x="${x.toFixed(1)}" y="${y(v.median).toFixed(1)}" width="${(bar - 2).toFixed(1)}" height="${h.toFixed(1)}" fill="${COLOURS[consumer]}"><title>${esc(`${CONSUMER_LABELS[consumer]}, ${scenario}: ${v.median.toFixed(spec.digits)} (${v.min.toFixed(spec.digits)}-${v.max.toFixed(spec.digits)})${spec.detail ? `; ${spec.detail(s)}` : ''}`)}</title></rect>`,
      );
      const cx = (x + (bar - 2) / 2).toFixed(1);
      if (v.n > 1 && v.max > v.min) {
        out.push(
          `<line x1="${cx}" x2="${cx}" y1="${y(v.min).toFixed(1)}" y2="${y(v.max).toFixed(1)}" class="whisker"/>`,
        );
      }
      out.push(
        `<text x="${cx}" y="${(y(v.max) - 3).toFixed(1)}" class="value" text-anchor="middle">${esc(v.median.toFixed(spec.digits))}</text>`,
      );
    });
    const workers = summaries.find((x) => x.scenario === scenario)?.workers;
    out.push(
      `<text x="${(LEFT + g * group + group / 2).toFixed(1)}" y="${plotTop + plotHeight + 16}" class="label" text-anchor="middle">${esc(scenario)}</text>`,
      `<text x="${(LEFT + g * group + group / 2).toFixed(1)}" y="${plotTop + plotHeight + 30}" class="tick" text-anchor="middle">${esc(`${workers ?? '?'} worker${workers === 1 ? '' : 's'}`)}</text>`,
    );
  });
  return out;
}

/**
 * The results chart, as SVG: throughput, cost per million jobs and double effects per consumer and
 * scenario.
 */
export function chartSvg(summaries: readonly ConsumerSummary[], title: string, footnote: string): string {
  const scenarios = [...new Set(summaries.map((s) => s.scenario))];
  const consumers = (Object.keys(COLOURS) as ConsumerId[]).filter((c) =>
    summaries.some((s) => s.consumer === c),
  );
  const height = 60 + PANELS * PANEL_HEIGHT + 40;
  const legend = consumers.map((c, i) => {
    const x = LEFT + i * 230;
    return `<rect x="${x}" y="40" width="12" height="12" fill="${COLOURS[c]}"/><text x="${x + 18}" y="50" class="label">${esc(CONSUMER_LABELS[c])}</text>`;
  });
  const body = [
    ...panel(
      60,
      {
        title: 'Throughput (jobs/s, every message counted; higher is better)',
        unit: 'jobs/s',
        value: (s) => s.jobsPerSecond,
        digits: 0,
      },
      summaries,
      scenarios,
      consumers,
    ),
    ...panel(
      60 + PANEL_HEIGHT,
      {
        title: `Cost per million jobs (USD: Lambda arm64 ${PRICES.lambdaMemoryMb} MB + DynamoDB on-demand + SQS, ${PRICES.region} prices as of ${PRICES.asOf}; lower is better)`,
        unit: 'USD / M jobs',
        value: (s) => s.cost.total,
        detail: (s) =>
          `Lambda ${s.cost.lambda.median.toFixed(2)} (${s.lambdaMsPerJob.median.toFixed(2)} ms/job), DynamoDB ${s.cost.dynamodb.median.toFixed(2)}, SQS ${s.cost.sqs.median.toFixed(2)}`,
        digits: 2,
      },
      summaries,
      scenarios,
      consumers,
    ),
    ...panel(
      60 + 2 * PANEL_HEIGHT,
      {
        title: 'Double effects per 1,000 jobs (a counter above 1; 0 is the only right answer)',
        unit: 'per 1,000 jobs',
        value: (s) => s.doublesPerThousandJobs,
        digits: 0,
      },
      summaries,
      scenarios,
      consumers,
    ),
  ];
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="Helvetica, Arial, sans-serif" role="img" aria-label="${esc(title)}">`,
    `<title>${esc(title)}</title>`,
    '<style>.title{font-size:14px;font-weight:bold}.label{font-size:12px}.tick{font-size:11px;fill:#555}.value{font-size:9px;fill:#333}.grid{stroke:#ddd;stroke-width:1}.whisker{stroke:#222;stroke-width:1.2}</style>',
    `<rect width="${WIDTH}" height="${height}" fill="#fff"/>`,
    `<text x="${LEFT}" y="24" style="font-size:16px;font-weight:bold">${esc(title)}</text>`,
    ...legend,
    ...body,
    `<text x="${LEFT}" y="${height - 12}" class="tick">${esc(footnote)}</text>`,
    '</svg>',
    '',
  ].join('\n');
}
