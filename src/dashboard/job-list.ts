// A queue page's list of jobs: the filter form (state, lane, name, tag, error, a bounded text
// search in data), opening a job by id, what a bounded search read, the rows (a checkbox, a
// one-line data preview, the actions of each job), bulk actions on the checked rows, and
// "Retry all" / "Retry N matching" on the ended tabs. The page script (assets.ts) builds rows
// with the same cells; the server checks every action again.
import { JOB_STATES, type JobState } from '../core/types.js';
import type { ListedJob, QueueStats } from '../inspect/inspector.js';
import { ACTION_STATES, esc, form, href, type PageContext, q, stateBadge, timeTag } from './markup.js';
import { dataPreview, filtered, type JobListing, type JobQuery, MAX_MATCHES, SEARCH_SCAN } from './search.js';

/** The states whose jobs retry takes back: their tabs offer Retry all / Retry N matching. */
const RETRYABLE: readonly JobState[] = ['dead', 'cancelled', 'completed'];
/** The actions the bulk bar offers, each on the states it applies to. */
const BULK = ['promote', 'retry', 'cancel', 'remove'] as const;

/** The link to a list with this query (empty parts left out). */
export function listHref(ctx: PageContext, queue: string, v: Partial<JobQuery>): string {
  return href(ctx, `/queues/${q(queue)}`, {
    state: v.state,
    lane: v.lane,
    name: v.name,
    tag: v.tag,
    error: v.error,
    text: v.text,
    offset: v.offset || undefined,
  });
}

/** The columns of the jobs table; the page script builds rows with the same cells. */
export function jobRow(ctx: PageContext, queue: string, job: ListedJob, ret: string): string {
  const base = `/queues/${q(queue)}/jobs/${q(job.id)}`;
  const when = job.leaseUntil ?? job.finishedAt ?? job.startedAt ?? job.runAt;
  const actions = (['promote', 'retry', 'cancel', 'remove'] as const)
    .filter((a) => ACTION_STATES[a].includes(job.state))
    .map((a) =>
      form(ctx, href(ctx, `${base}/${a}`), a[0]!.toUpperCase() + a.slice(1), ret, { danger: a === 'remove' }),
    )
    .join('');
  const lease = job.leaseExpired ? ' <span class="badge lease-expired">lease expired</span>' : '';
  const pick = ctx.csrf
    ? `<td class="pick"><input type="checkbox" name="id" value="${esc(job.id)}" form="bulk" aria-label="select ${esc(job.id)}"></td>`
    : '';
  return `<tr data-job="${esc(job.id)}">${pick}<td><a class="mono" href="${esc(href(ctx, base))}">${esc(job.id)}</a></td><td>${esc(job.name ?? '')}</td><td>${stateBadge(job.state)}${lease}</td><td class="num">${job.attempts} / ${job.maxAttempts}</td><td>${esc(job.group ?? '')}</td><td class="preview mono" title="${esc(dataPreview(job.data, 400))}">${esc(dataPreview(job.data))}</td><td>${timeTag(job.createdAt)}</td><td>${timeTag(when)}</td><td class="err">${esc(job.error?.message ?? '')}</td><td class="actions">${actions}</td></tr>`;
}

function filterForm(ctx: PageContext, stats: QueueStats, v: JobListing): string {
  const name = stats.name;
  const states = JOB_STATES.map(
    (s) =>
      `<option value="${esc(s)}"${s === v.state && v.lane === undefined ? ' selected' : ''}>${esc(s)}</option>`,
  ).join('');
  const lanes = stats.lanes
    .map(
      (l) =>
        `<option value="${esc(l.group)}"${l.group === v.lane ? ' selected' : ''}>${esc(l.group)}</option>`,
    )
    .join('');
  const input = (field: 'name' | 'tag' | 'error' | 'text', label: string, hint: string) =>
    `<label>${esc(label)} <input name="${field}" value="${esc(v[field] ?? '')}" placeholder="${esc(hint)}"></label>`;
  const clear = filtered(v)
    ? ` <a class="btn" id="filters-clear" href="${esc(listHref(ctx, name, { state: v.state, lane: v.lane }))}">Clear</a>`
    : '';
  return `<form class="filters" id="filters" method="get" action="${esc(href(ctx, `/queues/${q(name)}`))}">
<label>state <select name="state">${states}</select></label>
<label>lane <select name="lane"><option value="">any (pending: every lane)</option>${lanes}</select></label>
${input('name', 'name', 'exact job name')}${input('tag', 'tag', 'a tag')}${input('error', 'error', 'error contains')}${input('text', 'data', 'text in data or error')}
<button class="btn" type="submit">Filter</button>${clear}
<p class="hint">A lane lists pending jobs. Name, error and data filters read at most the first ${SEARCH_SCAN.toLocaleString('en-US')} jobs of the state in list order (no index): the result says how far it read.</p></form>
<form class="find-id" method="get" action="${esc(href(ctx, '/find'))}"><input type="hidden" name="queue" value="${esc(name)}"><label>job id <input name="id" placeholder="open a job by id" required></label><button class="btn" type="submit">Open</button></form>`;
}

function searchNote(v: JobListing): string {
  if (v.search) {
    const s = v.search;
    const read =
      s.scanned < s.inState
        ? ` Stopped after ${s.scanned.toLocaleString('en-US')} of ${s.inState.toLocaleString('en-US')} ${v.state} jobs (the bound${v.total >= MAX_MATCHES ? ` or ${MAX_MATCHES} matches` : ''}): older ones were not searched.`
        : ` All ${s.inState.toLocaleString('en-US')} ${v.state} jobs read.`;
    return `<p class="search-note" id="search-note">${v.total.toLocaleString('en-US')}${s.complete ? '' : '+'} matching.${read}</p>`;
  }
  if (v.partial) {
    return `<p class="search-note" id="search-note">Tag filter: ${v.total} matching among the first 10,000 jobs read; older ones were not searched.</p>`;
  }
  return '';
}

/** The checked-rows bar: one button per bulk action that applies to the tab's state. */
function bulkBar(ctx: PageContext, queue: string, v: JobListing, self: string): string {
  if (!ctx.csrf || v.jobs.length === 0) return '';
  const buttons = BULK.filter((a) => ACTION_STATES[a].includes(v.state))
    .map(
      (a) =>
        `<button type="submit" class="btn${a === 'remove' ? ' danger' : ''}" name="action" value="${a}" data-bulk="${a}">${a === 'promote' ? 'Run selected now' : `${a[0]!.toUpperCase() + a.slice(1)} selected`}</button>`,
    )
    .join('');
  return `<form class="bulk" id="bulk" method="post" action="${esc(href(ctx, `/queues/${q(queue)}/bulk`))}" data-confirm-bulk="1"><input type="hidden" name="_csrf" value="${esc(ctx.csrf)}"><input type="hidden" name="return" value="${esc(self)}"><span id="bulk-count">0 selected</span>${buttons}</form>`;
}

/**
 * Retry all (unfiltered) or Retry N matching (name and error filters: the ones retryAll takes)
 * on an ended tab, the count in its confirm; it runs as a task whose progress the page shows.
 */
function retryMatching(ctx: PageContext, stats: QueueStats, v: JobListing, self: string): string {
  if (!RETRYABLE.includes(v.state) || v.lane !== undefined) return '';
  if (v.tag !== undefined || v.text !== undefined) return ''; // retryAll cannot filter by these
  const fields: Record<string, string> = { state: v.state };
  if (v.name !== undefined) fields.name = v.name;
  if (v.error !== undefined) fields.error = v.error;
  const all = v.name === undefined && v.error === undefined;
  const n = all ? (stats.counts[v.state] ?? 0) : v.total;
  if (n === 0) return '';
  const exact = all || v.search?.complete === true;
  const count = `${n.toLocaleString('en-US')}${exact ? '' : '+'}`;
  const label = all ? `Retry all ${count}` : `Retry ${count} matching`;
  const confirm = all
    ? `Retry all ${count} ${v.state} jobs of ${stats.name}?`
    : exact
      ? `Retry the ${count} matching ${v.state} jobs?`
      : `Retry every matching ${v.state} job? ${v.total} matched in the ${v.search?.scanned} read; the retry reads all ${v.search?.inState}.`;
  return form(ctx, href(ctx, `/queues/${q(stats.name)}/retry-all`), label, self, {
    confirm,
    fields,
    task: true,
  });
}

/** The jobs card of a queue page. */
export function jobsSection(ctx: PageContext, stats: QueueStats, v: JobListing, self: string): string {
  const name = stats.name;
  const heading = `${v.lane === undefined ? v.state : `pending in lane ${v.lane}`}${v.tag ? ` tagged ${v.tag}` : ''}${v.name ? ` named ${v.name}` : ''}`;
  const rows = v.jobs.map((j) => jobRow(ctx, name, j, self)).join('\n');
  const from = v.total === 0 ? 0 : v.offset + 1;
  const to = v.offset + v.jobs.length;
  const page = (offset: number | undefined) => listHref(ctx, name, { ...v, offset });
  const prev =
    v.offset > 0
      ? `<a class="btn" rel="prev" href="${esc(page(Math.max(0, v.offset - v.limit) || undefined))}">← newer</a>`
      : '';
  const next =
    to < v.total ? `<a class="btn" rel="next" href="${esc(page(v.offset + v.limit))}">older →</a>` : '';
  const pickAll = ctx.csrf
    ? '<th class="pick"><input type="checkbox" id="pick-all" aria-label="select all on this page"></th>'
    : '';
  return `<section class="card" id="jobs-card"><div class="toolbar"><h2>${esc(heading)}</h2>${retryMatching(ctx, stats, v, self)}</div>
${filterForm(ctx, stats, v)}
${searchNote(v)}
${bulkBar(ctx, name, v, self)}
<table class="grid" id="jobs"><thead><tr>${pickAll}<th>id</th><th>name</th><th>state</th><th class="num">attempts</th><th>lane</th><th>data</th><th>created</th><th>ran / ends</th><th>error</th><th></th></tr></thead><tbody>${rows}</tbody></table>
${v.jobs.length === 0 ? '<p class="empty" id="jobs-empty">No jobs here.</p>' : ''}
<div class="pager"><span id="jobs-range">${from}–${to} of ${v.total}${v.search && !v.search.complete ? '+' : ''}</span>${prev}${next}</div></section>`;
}
