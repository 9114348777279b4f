// CDK entry point (cdk.json: `npx tsx infra/app.ts`). Options come from context, e.g.
//   npx cdk synth -c stage=prod -c maxAttempts=8 -c fifo=true
// No account or region is set: the stack is environment-agnostic, so synth needs no credentials.
import { App } from 'aws-cdk-lib';
import { leaseqStackName, stackPropsFromContext } from './leaseq-app.ts';
import { LeaseqStack } from './leaseq-stack.ts';

const app = new App();
const props = stackPropsFromContext(app);
new LeaseqStack(app, leaseqStackName(props.stage ?? 'dev'), {
  ...props,
  description: 'leaseq: exactly-once-in-effect SQS job processing (queue, DLQ, state tables, worker)',
});
app.synth();
