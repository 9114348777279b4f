/**
 * The inspector's layout: the page frame (header with the navigation and the target line, banners, the
 * body, the page's script) and its stylesheet, shared by every page.
 */
import { esc } from './html.ts';
import { SEARCH_MAX_CHARS } from './search.ts';

/**
 * The colours of the stylesheet, as text-on-background pairs: each pair is checked against WCAG AA
 * (4.5:1 for normal text) by test/unit/cli/ui-guard.test.ts, so a colour changed here is checked too.
 */
export const PALETTE = {
  text: { fg: '#1b1f24', bg: '#ffffff' },
  muted: { fg: '#4d5560', bg: '#ffffff' },
  link: { fg: '#0a4fb3', bg: '#ffffff' },
  header: { fg: '#ffffff', bg: '#1f2a37' },
  headerLink: { fg: '#dbe7ff', bg: '#1f2a37' },
  tableHead: { fg: '#1b1f24', bg: '#eef1f4' },
  banner: { fg: '#6b1100', bg: '#fde7df' },
  notice: { fg: '#0d3d1e', bg: '#e3f3e8' },
  bad: { fg: '#8a1414', bg: '#fbe9e9' },
  good: { fg: '#155c2a', bg: '#e6f4ea' },
  warn: { fg: '#6a4a00', bg: '#fff4d6' },
  button: { fg: '#ffffff', bg: '#0b57d0' },
  danger: { fg: '#ffffff', bg: '#b3261e' },
  code: { fg: '#1b1f24', bg: '#f4f6f8' },
} as const;

const P = PALETTE;

const CSS = `
*{box-sizing:border-box}
body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:${P.text.fg};background:${P.text.bg}}
header{background:${P.header.bg};color:${P.header.fg};padding:.6rem 1.2rem;display:flex;gap:1.4rem;align-items:baseline;flex-wrap:wrap}
header strong{font-size:1.05rem}
header a{color:${P.headerLink.fg}}
header .target{color:${P.headerLink.fg};font-size:.85rem;margin-left:auto}
main{padding:1rem 1.2rem;max-width:80rem}
a{color:${P.link.fg}}
h1{font-size:1.35rem;margin:.2rem 0 .8rem}
h2{font-size:1.1rem;margin:1.4rem 0 .5rem}
.muted{color:${P.muted.fg}}
table{border-collapse:collapse;width:100%;margin:.3rem 0 1rem}
th,td{text-align:left;padding:.3rem .55rem;border-bottom:1px solid #d5dae0;vertical-align:top}
th{background:${P.tableHead.bg};color:${P.tableHead.fg};font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.banner{background:${P.banner.bg};color:${P.banner.fg};border-left:4px solid #b3261e;padding:.6rem .9rem;margin:.6rem 0}
.notice{background:${P.notice.bg};color:${P.notice.fg};border-left:4px solid #1e7d3a;padding:.6rem .9rem;margin:.6rem 0}
.badge{display:inline-block;padding:0 .4rem;border-radius:.3rem;font-size:.85rem;font-weight:600}
.bad{background:${P.bad.bg};color:${P.bad.fg}}
.good{background:${P.good.bg};color:${P.good.fg}}
.warn{background:${P.warn.bg};color:${P.warn.fg}}
.cards{display:flex;gap:.8rem;flex-wrap:wrap;margin:.4rem 0 1rem}
.card{border:1px solid #c9d0d8;border-radius:.4rem;padding:.5rem .8rem;min-width:9rem}
.card .n{font-size:1.5rem;font-weight:650;font-variant-numeric:tabular-nums}
.card .n.stale{color:${P.muted.fg}}
.card .n.stale::after{content:" (as of " attr(data-as-of) ")";font-size:.75rem;font-weight:400}
button,.button{font:inherit;border:0;border-radius:.3rem;padding:.35rem .8rem;background:${P.button.bg};color:${P.button.fg};cursor:pointer;text-decoration:none;display:inline-block}
button.danger{background:${P.danger.bg};color:${P.danger.fg}}
button:focus-visible,a:focus-visible,input:focus-visible,select:focus-visible{outline:3px solid #f29900;outline-offset:2px}
form.filters{display:flex;gap:.8rem;flex-wrap:wrap;align-items:end;margin:.4rem 0 1rem}
form.filters label{display:flex;flex-direction:column;font-size:.85rem;color:${P.muted.fg}}
input,select{font:inherit;padding:.25rem .4rem;border:1px solid #8a939e;border-radius:.25rem;color:${P.text.fg};background:${P.text.bg}}
pre,code{background:${P.code.bg};color:${P.code.fg};font:13px/1.4 ui-monospace,Menlo,Consolas,monospace}
pre{padding:.6rem;overflow:auto;max-height:30rem}
ol.timeline{list-style:none;padding:0;margin:.3rem 0 1rem;border-left:3px solid #c9d0d8}
ol.timeline li{padding:.25rem .8rem;position:relative}
ol.timeline li::before{content:"";position:absolute;left:-.45rem;top:.7rem;width:.6rem;height:.6rem;border-radius:50%;background:#4d5560}
ol.timeline li.failed::before,ol.timeline li.dead::before,ol.timeline li.lease-lost::before{background:#b3261e}
ol.timeline li.completed::before{background:#1e7d3a}
ol.timeline .when{font-variant-numeric:tabular-nums;color:${P.muted.fg};font-size:.85rem;margin-right:.5rem}
svg text{font:12px system-ui,sans-serif;fill:${P.text.fg}}
.legend span{margin-right:1rem;font-size:.85rem}
header form.search{display:flex;gap:.3rem}
header form.search input{width:22rem;max-width:60vw}
textarea{font:13px/1.4 ui-monospace,Menlo,Consolas,monospace;width:100%;padding:.4rem;border:1px solid #8a939e;border-radius:.25rem;color:${P.text.fg};background:${P.text.bg}}
.sw{display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem;vertical-align:-.1rem}
`;

/** The header's links, in order: a page reached from the header adds its line here. */
export const NAV: readonly (readonly [href: string, label: string])[] = [
  ['/', 'Overview'],
  ['/jobs', 'Problem jobs'],
  ['/jobs/bulk-cancel', 'Cancel by filter'],
  ['/dlq', 'Dead letters'],
  ['/dlq/bulk-redrive', 'Redrive by filter'],
];

export interface PageOptions {
  readonly title: string;
  /** The target line (`target: local emulator ...`), shown in the header. */
  readonly target: string;
  /** Store calls that failed or timed out: shown as banners above the page. */
  readonly problems?: readonly string[];
  readonly notice?: string;
  readonly script?: string;
  /** The search box's text (the find page keeps what was searched). */
  readonly search?: string;
}

/** The search box of every page's header: a GET to /find (find-page.ts; its syntax is search.ts's). */
export function searchBox(q = ''): string {
  return `<form class="search" method="get" action="/find" role="search" aria-label="find jobs"><input id="find-q" name="q" type="search" maxlength="${SEARCH_MAX_CHARS}" value="${esc(q)}" placeholder="dedup key, or type: status: reason: error: since:" aria-label="dedup key or filters"><button type="submit">Find</button></form>`;
}

/** The page frame: header with navigation, the search box, banners, the body. */
export function page(body: string, options: PageOptions): string {
  const banners = (options.problems ?? [])
    .map((p) => `<div class="banner" role="alert">${esc(p)}</div>`)
    .join('');
  const notice = options.notice ? `<div class="notice" role="status">${esc(options.notice)}</div>` : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${esc(options.title)} · leaseq</title><style>${CSS}</style></head>
<body><header><strong>leaseq</strong><nav aria-label="pages">${NAV.map(([href, label]) => `<a href="${href}">${esc(label)}</a>`).join(' · ')}</nav>
${searchBox(options.search)}<span class="target">${esc(options.target)}</span></header>
<main>${banners}${notice}${body}</main>${options.script ? `<script>${options.script}</script>` : ''}</body></html>`;
}
