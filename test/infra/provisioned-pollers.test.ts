import { fileURLToPath } from 'node:url';
import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { describe, expect, it } from 'vitest';
import { cdkJsonContext } from '../../infra/leaseq-app.ts';
import { LeaseqPipeline, type LeaseqPipelineProps } from '../../infra/leaseq-pipeline.ts';

// The event source's provisioned mode (ProvisionedPollerConfig): synthesized when asked for, and what AWS
// refuses (with MaximumConcurrency, a bound out of range, a minimum above the maximum) refused at synth.

const ENTRY = fileURLToPath(new URL('../../functions/worker.ts', import.meta.url));

function synth(props: Partial<LeaseqPipelineProps> = {}, tamper?: (pipeline: LeaseqPipeline) => void) {
  const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] } });
  const stack = new Stack(app, 'UserStack');
  const pipeline = new LeaseqPipeline(stack, 'Jobs', { entry: ENTRY, resourcePrefix: 'shop', ...props });
  tamper?.(pipeline);
  return Template.fromStack(stack);
}

const mappingOf = (p: LeaseqPipeline) =>
  p.worker.function.node
    .findAll()
    .find(
      (c): c is lambda.CfnEventSourceMapping => c instanceof lambda.CfnEventSourceMapping,
    ) as lambda.CfnEventSourceMapping;

const reserve = (n: number) => (p: LeaseqPipeline) => {
  (p.worker.function.node.defaultChild as lambda.CfnFunction).reservedConcurrentExecutions = n;
};

describe('LeaseqPipeline provisionedPollers', () => {
  it('synthesizes the event source in provisioned mode, without MaximumConcurrency', () => {
    const template = synth({ provisionedPollers: { minimumPollers: 10, maximumPollers: 1000 } });
    const [mapping] = Object.values(template.findResources('AWS::Lambda::EventSourceMapping'));
    expect(mapping?.Properties).toMatchObject({
      ProvisionedPollerConfig: { MinimumPollers: 10, MaximumPollers: 1000 },
      BatchSize: 10,
    });
    expect(mapping?.Properties.ScalingConfig).toBeUndefined();
    // Standard mode by default: MaximumConcurrency 5, no pollers.
    const [standard] = Object.values(synth().findResources('AWS::Lambda::EventSourceMapping'));
    expect(standard?.Properties.ScalingConfig).toEqual({ MaximumConcurrency: 5 });
    expect(standard?.Properties.ProvisionedPollerConfig).toBeUndefined();
    // AWS's defaults (2 and 200) when neither bound is given.
    const [defaults] = Object.values(
      synth({ provisionedPollers: {} }).findResources('AWS::Lambda::EventSourceMapping'),
    );
    expect(defaults?.Properties.ProvisionedPollerConfig).toEqual({});
  });

  it('refuses maxConcurrency beside provisionedPollers: AWS takes one or the other', () => {
    expect(() => synth({ maxConcurrency: 50, provisionedPollers: { maximumPollers: 10 } })).toThrow(
      'LeaseqPipeline prop maxConcurrency is 50; expected no maxConcurrency with provisionedPollers: the event source takes one or the other (bound the concurrency with provisionedPollers.maximumPollers instead, up to 10 invocations a poller)',
    );
    // Also when an escape hatch puts MaximumConcurrency back on the mapping.
    expect(() =>
      synth({ provisionedPollers: { maximumPollers: 10 } }, (p) => {
        mappingOf(p).scalingConfig = { maximumConcurrency: 20 };
      }),
    ).toThrow(
      /leaseq safety rule pollers-without-max-concurrency: the event source has ProvisionedPollerConfig and ScalingConfig.MaximumConcurrency 20/,
    );
  });

  it.each([
    [{ minimumPollers: 1 }, 'provisionedPollers.minimumPollers is 1; expected an integer from 2 to 200'],
    [{ minimumPollers: 201 }, 'provisionedPollers.minimumPollers is 201; expected an integer from 2 to 200'],
    [{ maximumPollers: 1 }, 'provisionedPollers.maximumPollers is 1; expected an integer from 2 to 2000'],
    [
      { maximumPollers: 2001 },
      'provisionedPollers.maximumPollers is 2001; expected an integer from 2 to 2000',
    ],
    [{ maximumPollers: 2.5 }, 'provisionedPollers.maximumPollers is 2.5; expected an integer from 2 to 2000'],
    [
      { minimumPollers: 50, maximumPollers: 20 },
      'provisionedPollers.minimumPollers is 50; expected at most provisionedPollers.maximumPollers (20)',
    ],
  ])('refuses %o', (pollers, message) => {
    expect(() => synth({ provisionedPollers: pollers })).toThrow(`LeaseqPipeline prop ${message}`);
  });

  it('rule reserved-covers-pollers: a reserved concurrency below what the pollers start fails synth', () => {
    expect(() => synth({ provisionedPollers: { maximumPollers: 20 } }, reserve(100))).toThrow(
      /reserved-covers-pollers: worker reserved concurrency is 100 and the event source's 20 pollers start up to 200 invocations at once; required at least 200: each batch Lambda throttles returns to the queue as receives that run no job \(set maximumPollers to at most 10, or reserve at least 200\)/,
    );
    // The default ceiling, 200 pollers, starts up to 2,000.
    expect(() => synth({ provisionedPollers: {} }, reserve(1000))).toThrow(/required at least 2000/);
    expect(() => synth({ provisionedPollers: { maximumPollers: 20 } }, reserve(200))).not.toThrow();
    expect(() => synth({ provisionedPollers: { maximumPollers: 20 } }, reserve(0))).not.toThrow();
  });
});
