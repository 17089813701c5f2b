// The controls' markup: the queue page's toolbar (pause or resume, drain the waiting jobs, clean
// the tab's ended jobs), a queue's lanes (the table on the queue page, the busiest first, and
// the lanes page with each lane's pause, resume, concurrency and rate limit), and the
// schedulers page with run now and remove. Control forms carry data-control: the page script
// (assets-controls.ts) posts them in the background and says what happened in a toast; without
// the script they post as plain forms and come back to the page.
import type { JobState, LaneInfo } from '../core/types.js';
import type { QueueStats, SchedulersResult } from '../inspect/inspector.js';
import { esc, fmtDuration, form, href, layout, type PageContext, q, timeTag } from './markup.js';

/** Lanes the queue page lists (the busiest); the lanes page has them all, a page at a time. */
export const QUEUE_PAGE_LANES = 10;
export const LANES_PAGE_SIZE = 50;

/** A form the controls script posts: hidden CSRF and return fields, then `inner`. */
function controlForm(
  ctx: PageContext,
  action: string,
  ret: string,
  inner: string,
  opts: { confirm?: string; cls?: string } = {},
): string {
  if (!ctx.csrf) return '';
  return `<form class="${opts.cls ?? 'action'}" method="post" action="${esc(action)}" data-control="1"${opts.confirm ? ` data-confirm="${esc(opts.confirm)}"` : ''}><input type="hidden" name="_csrf" value="${esc(ctx.csrf)}"><input type="hidden" name="return" value="${esc(ret)}">${inner}</form>`;
}

function button(label: string, opts: { value?: string; danger?: boolean } = {}): string {
  const value = opts.value === undefined ? '' : ` name="do" value="${esc(opts.value)}"`;
  return `<button type="submit" class="btn${opts.danger ? ' danger' : ''}"${value} data-action="${esc(label.toLowerCase().replace(/\s+/g, '-'))}">${esc(label)}</button>`;
}

// ── the queue ───────────────────────────────────────────────────────────────

const CLEANABLE: readonly JobState[] = ['completed', 'dead', 'cancelled'];

/**
 * The queue page's toolbar controls: Pause or Resume; Drain N waiting (pending and the lanes;
 * scheduled jobs stay); on an ended tab, Clean N of that state. Drain and clean run as tasks
 * whose progress the page follows in a toast (assets-ops.ts), each after a confirm with its count.
 */
export function queueControls(ctx: PageContext, stats: QueueStats, state: JobState, ret: string): string {
  const name = stats.name;
  const base = `/queues/${q(name)}`;
  const pause = stats.paused
    ? form(ctx, href(ctx, `${base}/resume`), 'Resume', ret)
    : form(ctx, href(ctx, `${base}/pause`), 'Pause', ret);
  const waiting = stats.counts.pending ?? 0;
  const drain =
    waiting > 0
      ? form(ctx, href(ctx, `${base}/drain`), `Drain ${waiting.toLocaleString('en-US')} waiting`, ret, {
          danger: true,
          task: true,
          confirm: `Delete all ${waiting.toLocaleString('en-US')} waiting jobs of ${name} (pending and in lanes)? Scheduled and running jobs stay.`,
        })
      : '';
  const ended = stats.counts[state] ?? 0;
  const clean =
    CLEANABLE.includes(state) && ended > 0
      ? form(ctx, href(ctx, `${base}/clean`), `Clean ${ended.toLocaleString('en-US')} ${state}`, ret, {
          danger: true,
          task: true,
          fields: { state },
          confirm: `Delete all ${ended.toLocaleString('en-US')} ${state} jobs of ${name}?`,
        })
      : '';
  return `${pause}${drain}${clean}`;
}

// ── lanes ───────────────────────────────────────────────────────────────────

/** Busiest first: most waiting, then most running, then by name. */
export function byWaiting(lanes: readonly LaneInfo[]): LaneInfo[] {
  return [...lanes].sort(
    (a, b) => b.pending - a.pending || b.running - a.running || (a.group < b.group ? -1 : 1),
  );
}

const laneBase = (queue: string, lane: string) => `/queues/${q(queue)}/lanes/${q(lane)}`;

function pauseForm(ctx: PageContext, queue: string, l: LaneInfo, ret: string): string {
  const base = href(ctx, laneBase(queue, l.group));
  return l.paused
    ? controlForm(ctx, `${base}/resume`, ret, button('Resume'))
    : controlForm(ctx, `${base}/pause`, ret, button('Pause'), {
        confirm: `Pause lane ${l.group}? Its ${l.pending} waiting job(s) stay until it is resumed; running ones finish.`,
      });
}

const waitOf = (stats: QueueStats, lane: string) => {
  const ms = stats.lanesOldestWaitingMs[lane];
  return ms === undefined ? '—' : fmtDuration(ms);
};
const rateOf = (l: LaneInfo) => (l.rateLimit ? `${l.rateLimit.max} per ${l.rateLimit.perMs} ms` : '—');

/** The queue page's lanes card: the busiest lanes with pause / resume, and the way to the rest. */
export function laneTable(ctx: PageContext, stats: QueueStats, ret: string): string {
  if (stats.lanes.length === 0)
    return '<p class="empty">No lanes: jobs enqueued with a group wait in its lane.</p>';
  const name = stats.name;
  const shown = byWaiting(stats.lanes).slice(0, QUEUE_PAGE_LANES);
  const rows = shown
    .map(
      (l) =>
        `<tr data-lane="${esc(l.group)}"><td><a href="${esc(href(ctx, `/queues/${q(name)}`, { state: 'pending', lane: l.group }))}">${esc(l.group)}</a></td><td class="num" data-lane-pending>${l.pending}</td><td class="num" data-lane-wait>${waitOf(stats, l.group)}</td><td class="num" data-lane-running>${l.running}</td><td class="num">${l.concurrency || '∞'}</td><td>${esc(rateOf(l))}</td><td>${l.paused ? '<span class="badge paused">paused</span> ' : ''}${pauseForm(ctx, name, l, ret)}</td></tr>`,
    )
    .join('');
  const more =
    stats.lanes.length > shown.length ? `the ${shown.length} busiest of ${stats.lanes.length} lanes · ` : '';
  return `<table class="grid" id="lanes"><thead><tr><th>lane</th><th class="num">waiting</th><th class="num">oldest wait</th><th class="num">running</th><th class="num">concurrency</th><th>rate limit</th><th></th></tr></thead><tbody>${rows}</tbody></table>
<p class="legend">${more}<a id="lane-controls" href="${esc(href(ctx, `/queues/${q(name)}/lanes`))}">Lane controls: concurrency and rate limits${stats.lanes.length > shown.length ? ', every lane' : ''}</a></p>`;
}

function laneCard(ctx: PageContext, stats: QueueStats, l: LaneInfo, ret: string): string {
  const base = href(ctx, laneBase(stats.name, l.group));
  const conc = controlForm(
    ctx,
    `${base}/concurrency`,
    ret,
    `<label>concurrency <input type="number" name="concurrency" min="0" step="1" value="${l.concurrency}" title="0 = unlimited"></label>${button('Set', { value: 'set' })}${button('Clear', { value: 'clear' })}`,
    { cls: 'control' },
  );
  const rate = controlForm(
    ctx,
    `${base}/rate`,
    ret,
    `<label>max <input type="number" name="max" min="1" step="1" value="${l.rateLimit?.max ?? ''}"></label><label>per ms <input type="number" name="perMs" min="1" step="1" value="${l.rateLimit?.perMs ?? ''}"></label>${button('Set', { value: 'set' })}${button('Clear', { value: 'clear' })}`,
    { cls: 'control' },
  );
  return `<section class="card lane-card" data-lane-card="${esc(l.group)}"><div class="toolbar"><h2><a href="${esc(href(ctx, `/queues/${q(stats.name)}`, { state: 'pending', lane: l.group }))}">${esc(l.group)}</a> ${l.paused ? '<span class="badge paused">paused</span>' : ''}</h2>${pauseForm(ctx, stats.name, l, ret)}</div>
<p class="stats"><span data-lane-pending>${l.pending}</span> waiting · oldest wait <span data-lane-wait>${waitOf(stats, l.group)}</span> · <span data-lane-running>${l.running}</span> running · concurrency ${l.concurrency || '∞'} · rate limit ${esc(rateOf(l))}</p>
<div class="controls">${conc}${rate}</div></section>`;
}

/** Every lane of a queue, the busiest first, a page at a time, each with its controls. */
export function lanesPage(ctx: PageContext, stats: QueueStats, offset: number): string {
  const name = stats.name;
  const all = byWaiting(stats.lanes);
  const page = all.slice(offset, offset + LANES_PAGE_SIZE);
  const self = href(ctx, `/queues/${q(name)}/lanes`, { offset: offset || undefined });
  const at = (o: number) => href(ctx, `/queues/${q(name)}/lanes`, { offset: o || undefined });
  const prev =
    offset > 0
      ? `<a class="btn" rel="prev" href="${esc(at(Math.max(0, offset - LANES_PAGE_SIZE)))}">← busier</a>`
      : '';
  const next =
    offset + page.length < all.length
      ? `<a class="btn" rel="next" href="${esc(at(offset + LANES_PAGE_SIZE))}">quieter →</a>`
      : '';
  const waiting = all.reduce((n, l) => n + l.pending, 0);
  const paused = all.filter((l) => l.paused).length;
  const body =
    all.length === 0
      ? '<p class="empty">No lanes: jobs enqueued with a group wait in its lane.</p>'
      : `<div class="lane-cards">${page.map((l) => laneCard(ctx, stats, l, self)).join('\n')}</div>
<div class="pager"><span id="lanes-range">${offset + 1}–${offset + page.length} of ${all.length}</span>${prev}${next}</div>`;
  return layout(ctx, {
    title: `${name} lanes`,
    page: 'lanes',
    data: { queue: name },
    crumbs: [
      [name, href(ctx, `/queues/${q(name)}`)],
      ['lanes', null],
    ],
    body: `<h1>Lanes of ${esc(name)}</h1>
<p class="stats" id="lanes-summary">${all.length} lane(s) · ${waiting} waiting · ${paused} paused · oldest waiting job in a lane: ${
      Object.keys(stats.lanesOldestWaitingMs).length === 0
        ? 'none waits'
        : fmtDuration(Math.max(...Object.values(stats.lanesOldestWaitingMs)))
    }. Concurrency 0 is unlimited; Clear removes a lane's own setting (the default for lanes applies again).</p>
${body}`,
  });
}

// ── schedulers and repeats ──────────────────────────────────────────────────

export function schedulersPage(ctx: PageContext, queue: string, s: SchedulersResult): string {
  const self = href(ctx, `/queues/${q(queue)}/schedulers`);
  const repeats =
    s.repeats.length === 0
      ? '<p class="empty">No repeats registered.</p>'
      : `<table class="grid" id="repeats"><thead><tr><th>name</th><th class="num">every (ms)</th><th>next run</th><th class="num">runs</th><th>last run</th><th></th></tr></thead><tbody>${s.repeats
          .map(
            (r) =>
              `<tr data-repeat="${esc(r.name)}"><td>${esc(r.name)}</td><td class="num">${esc(r.everyMs ?? '—')}</td><td>${timeTag(r.nextRunAt)}</td><td class="num">${r.runs}</td><td>${timeTag(r.lastRunAt)}</td><td class="actions">${controlForm(
                ctx,
                href(ctx, `/queues/${q(queue)}/repeats/${q(r.name)}/remove`),
                self,
                button('Remove', { danger: true }),
                { confirm: `Remove repeat ${r.name} and its upcoming occurrence? Released ones run on.` },
              )}</td></tr>`,
          )
          .join('')}</tbody></table>`;
  const schedulers =
    s.schedulers.length === 0
      ? '<p class="empty">No job schedulers.</p>'
      : `<table class="grid" id="schedulers"><thead><tr><th>id</th><th>job name</th><th>cadence</th><th>next run</th><th class="num">runs</th><th>ended</th><th></th></tr></thead><tbody>${s.schedulers
          .map((x) => {
            const cadence =
              x.pattern !== undefined
                ? `cron ${x.pattern}${x.tz ? ` (${x.tz})` : ''}`
                : x.every !== undefined
                  ? `every ${x.every} ms`
                  : 'once';
            const limit = x.limit !== undefined ? ` / ${x.limit}` : '';
            const base = href(ctx, `/queues/${q(queue)}/schedulers/${q(x.id)}`);
            const run =
              x.ended === undefined
                ? controlForm(ctx, `${base}/run`, self, button('Run now'), {
                    confirm: `Run the upcoming occurrence of ${x.id} now? The one after it comes at its usual time.`,
                  })
                : '';
            const remove = controlForm(ctx, `${base}/remove`, self, button('Remove', { danger: true }), {
              confirm: `Remove scheduler ${x.id} and its upcoming occurrence? Released ones run on.`,
            });
            return `<tr data-scheduler="${esc(x.id)}"><td>${esc(x.id)}</td><td>${esc(x.name ?? '')}</td><td class="mono">${esc(cadence)}</td><td>${x.nextRunAt < 0 ? '—' : timeTag(x.nextRunAt)}</td><td class="num">${esc(`${x.iterationCount ?? 0}${limit}`)}</td><td>${esc(x.ended ?? '')}</td><td class="actions">${run}${remove}</td></tr>`;
          })
          .join('')}</tbody></table>`;
  return layout(ctx, {
    title: `${queue} schedulers`,
    page: 'schedulers',
    data: { queue },
    crumbs: [
      [queue, href(ctx, `/queues/${q(queue)}`)],
      ['schedulers', null],
    ],
    body: `<h1>Schedulers and repeats of ${esc(queue)}</h1>
<section class="card"><h2>Job schedulers</h2>${schedulers}<p class="legend">Run now releases a scheduler's upcoming occurrence at once; the next is made at the instant it had, so the cadence keeps its grid. A scheduler cannot be paused: remove it, and upsert it again to bring it back.</p></section>
<section class="card"><h2>Repeats</h2>${repeats}</section>`,
  });
}
