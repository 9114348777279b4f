// `leaseq/cdk`: the CDK construct to put leaseq in your own stack, and the reference stack.

export { tableOutputKey, tablePhysicalName } from '../shared/core/model/table.ts';
export { STACK_OUTPUT_KEYS, type StackOutputKey } from '../shared/resources.ts';
export type { LeaseqAlarmThresholds } from './constructs/alarm-thresholds.ts';
export { LEASEQ_METRICS_NAMESPACE, type LeaseqAlarms } from './constructs/pipeline-monitoring.ts';
export type {
  LeaseqExistingQueue,
  LeaseqExistingTables,
  LeaseqProvisionedPollers,
} from './constructs/pipeline-resources.ts';
export { addProblemsIndex } from './constructs/state-tables.ts';
export {
  WORKER_QUEUE_ACTIONS,
  WORKER_TABLE_ACTIONS,
  type WorkerLogLevel,
} from './constructs/worker-function.ts';
export {
  InvalidLeaseqPropsError,
  LeaseqPipeline,
  type LeaseqPipelineProps,
  type LeaseqTracingProps,
  RATE_ALARMS_CONTEXT,
  type ResolvedPipelineSettings,
} from './leaseq-pipeline.ts';
export { LeaseqStack, type LeaseqStackProps, type LeaseqStage } from './leaseq-stack.ts';
export {
  checkPipelineSafety,
  type PipelineSafetyFacts,
  type PipelineSafetyRule,
  type PipelineSafetyViolation,
} from './safety-checks.ts';
