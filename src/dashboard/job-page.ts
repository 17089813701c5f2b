// One job's page: what it is (facts, data, result), what happened to it (each attempt with its
// wait, run time, consumer and error; the timeline), where it stands (a running job's lease
// deadline, flagged once it has passed) and its flow (parent, children and their results).
// Everything a job carries passes through esc(); the page script (assets-job.ts) refreshes
// it from /api/queues/:queue/jobs/:id and pages through long logs. Fits a 390 px screen: the
// attempts table becomes labelled cards below 600 px (assets-job.ts).
import type { AttemptRun } from '../core/attempts.js';
import { isJobId } from '../core/ids.js';
import type { JobDetail } from '../inspect/inspector.js';
import { LOG_LINES_SHOWN } from '../inspect/views.js';
import type { LogPage } from '../jobs/logs.js';
import type { EchoMQ } from '../queue/echomq.js';
import { HttpError } from './http.js';
import {
  ACTION_STATES,
  esc,
  fmtDuration,
  fmtTime,
  form,
  href,
  layout,
  type PageContext,
  pretty,
  q,
  stateBadge,
  timeTag,
} from './markup.js';
import { dataPreview } from './search.js';

/** The attempts table's columns: its header and each cell's label on a narrow screen. */
const RUN_COLUMNS = ['#', 'consumer', 'ready', 'started', 'waited', 'ran', 'outcome', 'error'] as const;

const OUTCOME_CLASS: Record<AttemptRun['outcome'], string> = {
  running: 'state-active',
  completed: 'state-completed',
  failed: 'state-dead',
  stalled: 'state-scheduled',
  returned: 'state-cancelled',
  unknown: '',
};

function runRow(r: AttemptRun): string {
  const outcome = `<span class="state ${OUTCOME_CLASS[r.outcome]}">${esc(r.outcome)}</span>${r.reason ? ` <span class="fields">${esc(r.reason)}</span>` : ''}`;
  const cells = [
    esc(r.attempt),
    r.consumer ? `<span class="mono">${esc(r.consumer)}</span>` : '—',
    timeTag(r.readyAt),
    timeTag(r.startedAt),
    esc(fmtDuration(r.waitMs)),
    esc(fmtDuration(r.runMs)),
    outcome,
    r.error ? `<span class="error-message">${esc(r.error)}</span>` : '',
  ];
  return `<tr data-attempt="${esc(r.attempt)}" data-outcome="${esc(r.outcome)}">${cells
    .map((c, i) => `<td data-label="${RUN_COLUMNS[i]}"${i === 4 || i === 5 ? ' class="num"' : ''}>${c}</td>`)
    .join('')}</tr>`;
}

/** Each attempt (run) of the job, oldest first, and a note when earlier ones are gone. */
function runsSection(job: JobDetail): string {
  const head = RUN_COLUMNS.map((c, i) => `<th${i === 4 || i === 5 ? ' class="num"' : ''}>${c}</th>`).join('');
  const none = job.runs.length === 0;
  return `<section class="card" id="job-runs-box"><h2>Attempts</h2><p class="empty" id="job-runs-empty"${none ? '' : ' hidden'}>Not run yet.</p><table class="grid runs" id="job-runs"${none ? ' hidden' : ''}><thead><tr>${head}</tr></thead><tbody>${job.runs.map(runRow).join('')}</tbody></table><p class="empty" id="job-runs-partial"${job.runsPartial ? '' : ' hidden'}>Earlier attempts are no longer in the events stream (it keeps the newest entries): the row tells the latest.</p></section>`;
}

/**
 * A JSON value as formatted text with its tokens marked (keys, strings, numbers, literals) for
 * colour; the text itself (textContent) is exactly pretty()'s, which the copy button copies.
 */
export function jsonMarkup(text: string): string {
  const token = /("(?:\\.|[^"\\])*")(\s*:)?|\b(?:true|false|null)\b|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g;
  let out = '';
  let at = 0;
  for (const m of text.matchAll(token)) {
    out += esc(text.slice(at, m.index));
    const kind = m[1] ? (m[2] ? 'k' : 's') : /^[tfn]/.test(m[0]) ? 'l' : 'n';
    out +=
      kind === 'k'
        ? `<span class="j-k">${esc(m[1])}</span>${esc(m[2])}`
        : `<span class="j-${kind}">${esc(m[0])}</span>`;
    at = m.index + m[0].length;
  }
  return out + esc(text.slice(at));
}

/** Lines over which a JSON box starts folded (its summary still says how much it holds). */
const FOLD_LINES = 40;

/** A collapsible box of formatted JSON (data, result, progress) with a copy button. */
function jsonBox(id: string, title: string, value: unknown, present: boolean): string {
  const text = present ? pretty(value) : '';
  const lines = text === '' ? 0 : text.split('\n').length;
  const isJson = present && typeof value !== 'string';
  const open = lines <= FOLD_LINES ? ' open' : '';
  return `<details class="card json-box" id="${id}-box"${open}${present ? '' : ' hidden'}><summary><h2>${esc(title)}</h2> <span class="fields" id="${id}-size">${lines} line${lines === 1 ? '' : 's'}</span> <button type="button" class="btn copy" data-copy="${id}">Copy</button></summary><pre id="${id}" class="json">${isJson ? jsonMarkup(text) : esc(text)}</pre></details>`;
}

function textBox(id: string, title: string, text: string | undefined): string {
  return `<section class="card" id="${id}-box"${text === undefined ? ' hidden' : ''}><h2>${esc(title)}</h2><pre id="${id}">${esc(text ?? '')}</pre></section>`;
}

/** The job's log: the newest LOG_LINES_SHOWN lines, with older and newer pages a click away. */
function logsSection(job: JobDetail): string {
  const from = Math.max(0, job.logCount - job.logs.length);
  const paged = job.logCount > job.logs.length;
  const range = `<span id="job-logs-range">${paged ? `lines ${from + 1}–${job.logCount} of ${job.logCount}` : `${job.logCount} line${job.logCount === 1 ? '' : 's'}`}</span>`;
  const pager = paged
    ? `<div class="pager" id="job-logs-pager" data-from="${from}" data-count="${job.logCount}" data-page="${LOG_LINES_SHOWN}"><button type="button" class="btn" data-logs="older">Older</button><button type="button" class="btn" data-logs="newer" disabled>Newer</button></div>`
    : '';
  return `<section class="card" id="job-logs-box"${job.logCount === 0 ? ' hidden' : ''}><h2>Logs <span class="fields">${range}</span></h2><pre id="job-logs">${esc(job.logs.join('\n'))}</pre>${pager}</section>`;
}

/** A flow job's parent and its first children (pending or processed, with their results). */
function flowSection(ctx: PageContext, job: JobDetail): string {
  if (!job.flow) return '';
  const link = (d: { queue: string; id: string }) =>
    `<a class="mono" href="${href(ctx, `/queues/${q(d.queue)}/jobs/${q(d.id)}`)}">${esc(d.id)}</a> <span class="fields">${esc(d.queue)}</span>`;
  const { parent, children } = job.flow;
  const items = [
    ...children.processed.map(
      (d) =>
        `<li>${link(d)} processed${d.failure ? `: <span class="error-message">${esc(d.failure)}</span>` : ''}${
          d.result === undefined ? '' : ` → <span class="mono">${esc(dataPreview(d.result, 120))}</span>`
        }</li>`,
    ),
    ...children.pending.map((d) => `<li>${link(d)} pending</li>`),
  ];
  return `<section class="card" id="job-flow-box"><h2>Flow</h2>${parent ? `<p>parent: ${link(parent)}</p>` : ''}${
    items.length > 0 ? `<ul id="job-flow-children">${items.join('')}</ul>` : ''
  }${children.cursor > 0 ? '<p class="empty">More children: echomq flow, or queue.dependencies().</p>' : ''}</section>`;
}

function historyItems(job: JobDetail): string {
  return job.history
    .map((e) => {
      const ms = Number(e.streamId.split('-')[0]);
      const fields = Object.entries(e.fields)
        .filter(([, v]) => v !== '')
        .map(([k, v]) => `${k}=${v}`)
        .join(' ');
      return `<li><time>${fmtTime(ms)}</time> <span class="event event-${esc(e.event)}">${esc(e.event)}</span> <span class="fields">${esc(fields)}</span></li>`;
    })
    .join('');
}

/** A running job's lease deadline; past it, flagged, with what returns the job. */
function leaseValue(job: JobDetail): string {
  if (job.leaseUntil === undefined) return '';
  const expired = job.leaseExpired
    ? ' <span class="badge lease-expired">expired</span> <span class="fields">its consumer died or hangs: <code>echomq recover</code> or a running consumer returns it</span>'
    : '';
  return `${timeTag(job.leaseUntil)}${expired}`;
}

export function jobPage(ctx: PageContext, queue: string, job: JobDetail): string {
  const self = href(ctx, `/queues/${q(queue)}/jobs/${q(job.id)}`);
  const back = href(ctx, `/queues/${q(queue)}`, { state: job.state });
  const actions = (['promote', 'retry', 'cancel', 'remove'] as const)
    .map((a) =>
      form(ctx, `${self}/${a}`, a[0]!.toUpperCase() + a.slice(1), a === 'remove' ? back : self, {
        danger: a === 'remove',
        states: ACTION_STATES[a],
        hidden: !ACTION_STATES[a].includes(job.state),
        confirm: a === 'remove' ? 'Delete this job for good?' : undefined,
      }),
    )
    .join('');
  const lastError = job.lastError
    ? `${job.lastError.message}\n\n${job.lastError.stack ?? ''}`.trim()
    : undefined;
  const row = (label: string, id: string, value: string, hidden = false) =>
    `<dt${hidden ? ' hidden' : ''}>${esc(label)}</dt><dd id="${id}"${hidden ? ' hidden' : ''}>${value}</dd>`;
  return layout(ctx, {
    title: job.id,
    page: 'job',
    data: { queue, job: job.id },
    crumbs: [
      [queue, href(ctx, `/queues/${q(queue)}`)],
      [job.id, null],
    ],
    body: `<h1 class="job-title"><span class="mono">${esc(job.id)}</span> ${stateBadge(job.state, 'job-state')}</h1>
<div class="toolbar" id="job-actions">${actions}</div>
<section class="card"><dl class="facts">
${row('name', 'job-name', esc(job.name ?? '—'))}
${row('lane', 'job-group', esc(job.group ?? '—'))}
${row('priority', 'job-priority', esc(job.priority ?? '—'))}
${row('tags', 'job-tags', esc(job.tags?.join(', ') ?? '—'))}
${row('attempts', 'job-attempts', esc(`${job.attempts} / ${job.maxAttempts}`))}
${row('consumer', 'job-consumer', job.consumer ? `<span class="mono">${esc(job.consumer)}</span>` : '—')}
${row('stalled', 'job-stalled', esc(job.stalled))}
${row('cancel requested', 'job-cancel', job.cancelRequested ? 'yes' : 'no')}
${row('created', 'job-created', timeTag(job.createdAt))}
${row('runs at', 'job-runat', timeTag(job.runAt))}
${row('started', 'job-started', timeTag(job.startedAt))}
${row('finished', 'job-finished', timeTag(job.finishedAt))}
${row('lease until', 'job-lease', leaseValue(job), job.leaseUntil === undefined)}
</dl></section>
${runsSection(job)}
${textBox('job-error', 'Error', job.error?.message)}
${textBox('job-stack', 'Stack', job.error?.stack)}
${textBox('job-last-error', 'Error before the last retry', lastError)}
${jsonBox('job-data', 'Data', job.data, true)}
${jsonBox('job-result', 'Result', job.result, job.result !== undefined)}
${jsonBox('job-progress', 'Progress', job.progress, job.progress !== undefined)}
${flowSection(ctx, job)}
${logsSection(job)}
<section class="card"><h2>Timeline</h2><ol class="timeline" id="job-history">${historyItems(job)}</ol>${job.historyTruncated ? '<p class="empty">Older entries were not read.</p>' : ''}<p class="empty">Events older than the stream's cap are gone.</p></section>`,
  });
}

/** `?name=` as a whole number in [min, max], `fallback` when absent; HTTP 400 otherwise. */
function wholeParam(
  query: URLSearchParams,
  name: string,
  min: number,
  max: number,
  fallback: number,
): number {
  const text = query.get(name);
  if (text === null || text === '') return fallback;
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < min || n > max)
    throw new HttpError(400, `${name} must be a whole number from ${min} to ${max}`);
  return n;
}

/** A page of a job's log for the page's Older/Newer buttons: `count` lines (default 100) from `from`. */
export async function logPage(
  mq: EchoMQ,
  c: { queue: string; params: Readonly<Record<string, string>>; query: URLSearchParams },
): Promise<LogPage & { from: number }> {
  const id = c.params.id ?? '';
  if (!isJobId(id)) throw new HttpError(404, `no job ${id} in queue ${c.queue}`);
  const from = wholeParam(c.query, 'from', 0, Number.MAX_SAFE_INTEGER, 0);
  const count = wholeParam(c.query, 'count', 1, 1000, LOG_LINES_SHOWN);
  return { ...(await mq.queue(c.queue).logs(id, { from, count })), from };
}
