import type { AwsClients } from '../aws/clients.ts';

/** Queue URLs and table names the operator functions work on (the CLI's resolved target fits it). */
export interface OpsNames {
  readonly queueUrl: string;
  readonly dlqUrl: string;
  readonly jobsTable: string;
  readonly leasesTable: string;
}

/** Clients plus names: one leaseq deployment, built by the caller (CLI command or `npm start`). */
export interface OpsTarget {
  readonly clients: AwsClients;
  readonly names: OpsNames;
}
