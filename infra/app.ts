// CDK entry point (cdk.json: `npx tsx infra/app.ts`). Options come from context, e.g.
//   npx cdk synth -c stage=prod -c maxAttempts=8 -c fifo=true
// No account or region is set: the stack is environment-agnostic, so synth needs no credentials.
// `-c nag=true` also runs cdk-nag's AWS Solutions checks (a dev dependency): findings fail the synth and
// are written to cdk.out/validation-report.json.
import { App, Validations } from 'aws-cdk-lib';
import { leaseqStackName, stackPropsFromContext } from './leaseq-app.ts';
import { LeaseqStack } from './leaseq-stack.ts';

const app = new App();
const props = stackPropsFromContext(app);
new LeaseqStack(app, leaseqStackName(props.stage ?? 'dev'), {
  ...props,
  description: 'leaseq: exactly-once-in-effect SQS job processing (queue, DLQ, state tables, worker)',
});
if (String(app.node.tryGetContext('nag')) === 'true') {
  const { AwsSolutionsChecks } = await import('cdk-nag');
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
}
app.synth();
