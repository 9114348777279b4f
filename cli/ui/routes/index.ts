/**
 * The inspector's routes, one file per page or action, registered in this order. A new page is a file
 * exporting a `UiRoute` and one line here (and one in layout.ts's NAV to reach it from the header). Order
 * counts where paths overlap: put a fixed path (`/jobs/search`) before a parameter one (`/jobs/:key`).
 */
import type { UiRoute } from '../context.ts';
import { findRoute } from '../find-page.ts';
import { fixRoute } from '../fix-page.ts';
import { revealRoute } from '../reveal-page.ts';
import { bulkCancelRoutes } from './bulk-cancel.ts';
import { bulkRedriveRoutes } from './bulk-redrive.ts';
import { dlqRoutes } from './dlq.ts';
import { dlqLetterRoutes } from './dlq-letter.ts';
import { dlqPurgeRoutes } from './dlq-purge.ts';
import { dlqRedriveRoutes } from './dlq-redrive.ts';
import { jobRoutes } from './job.ts';
import { jobCancelRoutes } from './job-cancel.ts';
import { overviewRoutes } from './overview.ts';
import { problemJobsRoutes } from './problem-jobs.ts';
import { tracesRoutes } from './traces.ts';

export const ROUTES: readonly UiRoute[] = [
  overviewRoutes,
  problemJobsRoutes,
  bulkCancelRoutes,
  jobRoutes,
  jobCancelRoutes,
  findRoute,
  revealRoute,
  fixRoute,
  dlqRoutes,
  dlqLetterRoutes,
  dlqRedriveRoutes,
  bulkRedriveRoutes,
  dlqPurgeRoutes,
  tracesRoutes,
];
