import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Seconds each long file took in a full CI run (4 file workers on the 2-core machine, log of 2026-12-02).
 * Only the order uses them: a stale figure costs a little wall time, never a check.
 */
const CI_SECONDS: Readonly<Record<string, number>> = {
  'test/integration/package/tarball.test.ts': 274,
  'test/model/interleaving.test.ts': 181,
  'test/integration/deploy/deployed-stack.test.ts': 147,
  'test/integration/cli/dlq.test.ts': 92,
  'test/integration/deploy/start-lambda.test.ts': 88,
  'test/integration/cli/workers-stop.test.ts': 88,
  'test/integration/deploy/iam.test.ts': 87,
  'test/integration/cli/jobs.test.ts': 77,
  'test/integration/cli/bad-input.test.ts': 75,
  'test/integration/cli/workers-settings.test.ts': 67,
  'test/integration/pipeline/workers.test.ts': 57,
  'test/integration/cli/own-job.test.ts': 55,
  'test/integration/cli/inspect-leases.test.ts': 55,
  'test/integration/core/pipeline/processor.test.ts': 54,
  'test/integration/cli/hostile-text.test.ts': 53,
  'test/integration/cli/dlq-tools.test.ts': 48,
  'test/integration/pipeline/start.test.ts': 43,
  'test/integration/pipeline/start-screen.test.ts': 42,
  'test/integration/pipeline/handler.test.ts': 41,
  'test/integration/cli/target-confirm.test.ts': 41,
  'test/integration/core/pipeline/fifo-redrive.test.ts': 39,
  'test/integration/cli/send-status.test.ts': 39,
  'test/integration/core/pipeline/slow-store.test.ts': 35,
  'test/integration/cli/status-workers.test.ts': 35,
  'test/integration/cli/dlq-fifo.test.ts': 35,
  'test/integration/cli/ui-browser.test.ts': 33,
  'test/integration/pipeline/trace-flush.test.ts': 32,
  'test/integration/core/pipeline/starved-lease.test.ts': 32,
  'test/unit/local/cli.test.ts': 31,
  'test/integration/core/pipeline/fifo-groups.test.ts': 31,
  'test/integration/cli/workers-timeout.test.ts': 30,
  'test/integration/core/pipeline/fast-path.test.ts': 29,
  'test/integration/core/leases/named-lease.test.ts': 28,
  'test/integration/problem-jobs-adversarial.test.ts': 27,
  'test/integration/cli/redrive-edit.test.ts': 27,
  'test/integration/core/adapters/store-contracts.test.ts': 24,
  'test/integration/core/adapters/redrive-history.test.ts': 24,
  'test/infra/cdk-synth.test.ts': 24,
  'test/integration/cli/inspect-history.test.ts': 23,
  'test/integration/core/pipeline/large-bodies.test.ts': 22,
  'test/integration/core/pipeline/dead-letter-refusal.test.ts': 22,
  'test/integration/cli/redrive-duplicate.test.ts': 22,
  'test/integration/pipeline/trace-load-failure.test.ts': 21,
  'test/conformance/sqs.test.ts': 21,
  'test/integration/core/pipeline/dedup-collision.test.ts': 20,
  'test/integration/cli/redrive-faults.test.ts': 20,
  'test/integration/cli/redrive-clock.test.ts': 20,
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
