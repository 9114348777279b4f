import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Seconds each long file took in a full CI run (4 file workers on the 2-core machine, log of 2026-12-02, files sharing their worker's modules).
 * Only the order uses them: a stale figure costs a little wall time, never a check.
 */
const CI_SECONDS: Readonly<Record<string, number>> = {
  'test/integration/package/tarball.test.ts': 176,
  'test/model/interleaving.test.ts': 146,
  'test/integration/deploy/deployed-stack.test.ts': 75,
  'test/integration/core/pipeline/concurrency-limit.test.ts': 71,
  'test/integration/cli/dlq.test.ts': 64,
  'test/integration/cli/workers-stop.test.ts': 62,
  'test/integration/core/pipeline/processor.test.ts': 39,
  'test/integration/pipeline/workers.test.ts': 36,
  'test/integration/cli/jobs.test.ts': 35,
  'test/integration/deploy/start-lambda.test.ts': 34,
  'test/integration/cli/bad-input.test.ts': 33,
  'test/integration/deploy/iam.test.ts': 33,
  'test/integration/cli/workers-settings.test.ts': 30,
  'test/integration/pipeline/handler.test.ts': 28,
  'test/integration/cli/own-job.test.ts': 24,
  'test/conformance/sqs.test.ts': 20,
  'test/integration/core/pipeline/fifo-redrive.test.ts': 19,
  'test/infra/synth-store.test.ts': 19,
  'test/integration/core/leases/named-lease.test.ts': 19,
  'test/integration/cli/inspect-leases.test.ts': 17,
  'test/integration/cli/dlq-tools.test.ts': 17,
  'test/integration/core/pipeline/fast-path.test.ts': 17,
  'test/integration/cli/ui-browser.test.ts': 16,
  'test/integration/pipeline/start.test.ts': 16,
  'test/integration/core/pipeline/slow-store.test.ts': 16,
  'test/integration/cli/hostile-text.test.ts': 15,
  'test/integration/cli/cancel.test.ts': 15,
  'test/integration/pipeline/trace-flush.test.ts': 15,
};

/**
 * Longest file first, across projects. Vitest's own order runs the projects one after another (by name)
 * and, without a results cache (a fresh CI clone), the larger files first: the model's 3-minute file
 * then started after every integration file and ran on alone at the end. Within a `groupOrder` this
 * orders by the CI figures above, then by the cached duration of an earlier local run, then as Vitest
 * would; `groupOrder` itself (the timing project runs last, alone) is kept.
 */
export class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const base = await super.sort(files);
    const rank = new Map(base.map((spec, index) => [spec, index]));
    const root = this.ctx.config.root;
    const seconds = (spec: TestSpecification): number => {
      const path = spec.moduleId.startsWith(`${root}/`)
        ? spec.moduleId.slice(root.length + 1)
        : spec.moduleId;
      const known = CI_SECONDS[path];
      if (known !== undefined) return known;
      const cached = this.ctx.cache.getFileTestResults(`${spec.project.name}:${path}`);
      return cached ? cached.duration / 1000 : 0;
    };
    return base.sort(
      (a, b) =>
        a.project.config.sequence.groupOrder - b.project.config.sequence.groupOrder ||
        seconds(b) - seconds(a) ||
        (rank.get(a) ?? 0) - (rank.get(b) ?? 0),
    );
  }
}
