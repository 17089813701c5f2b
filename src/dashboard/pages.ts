// The dashboard's pages, rendered on the server as HTML strings. Every value that comes from
// a queue (names, ids, payloads, results, errors, event fields) passes through esc(): nothing
// a job carries is ever markup. The page script (assets.ts) only updates text and attributes.

import { JOB_STATES } from '../core/types.js';
import { type MinuteRate, type QueueStats, type QueueSummary, STALE_BEATS } from '../inspect/inspector.js';
import { laneTable, queueControls } from './controls-pages.js';
import { jobsSection, listHref } from './job-list.js';
import { capBadge, esc, fmtTime, form, href, layout, type PageContext, q } from './markup.js';
import type { JobListing } from './search.js';

// ── the throughput chart ──────────────────────────────────────────────────────

/**
 * The chart's top: the busiest minute, unless one burst would flatten the others. With two or
 * more busy minutes the scale is capped at 3 × the 90th percentile of the busy (non-zero)
 * minutes; a taller bar is cut at the top and marked, its real figure in its tooltip.
 */
export function chartScale(totals: readonly number[]): { max: number; peak: number; capped: number } {
  const busy = totals.filter((t) => t > 0).sort((a, b) => a - b);
  const peak = busy[busy.length - 1] ?? 0;
  if (busy.length < 2) return { max: Math.max(1, peak), peak, capped: 0 };
  const cap = Math.max(1, 3 * busy[Math.floor(0.9 * (busy.length - 1))]!);
  if (peak <= cap) return { max: Math.max(1, peak), peak, capped: 0 };
  return { max: cap, peak, capped: busy.filter((t) => t > cap).length };
}

/** Completed and failed per minute as stacked bars, in an inline SVG (no script, no styles). */
export function throughputSvg(perMinute: readonly MinuteRate[], label: string): string {
  const w = 1200;
  const h = 150;
  const top = 14;
  const bottom = 18;
  const n = Math.max(perMinute.length, 1);
  const { max, peak, capped } = chartScale(perMinute.map((m) => m.completed + m.failed));
  const scale = (h - top - bottom) / max;
  const bw = w / n;
  const bars = perMinute
    .map((m, i) => {
      const x = (i * bw).toFixed(1);
      const y0 = h - bottom;
      const cut = m.completed + m.failed > max;
      // A cut bar keeps its failed share at the top, so a failing burst still shows red.
      const total = Math.min(m.completed + m.failed, max) * scale;
      const failH = cut ? (total * m.failed) / (m.completed + m.failed) : m.failed * scale;
      const okH = total - failH;
      const time = fmtTime(m.minute).slice(11, 16);
      const width = Math.max(bw - 1, 1).toFixed(1);
      const mark = cut
        ? `<rect class="bar-cut" x="${x}" y="${(y0 - total - 4).toFixed(1)}" width="${width}" height="3"/>`
        : '';
      return `<g${cut ? ' data-cut="1"' : ''}><title>${esc(`${time}: ${m.completed} completed, ${m.failed} failed${cut ? ' (cut at the top of the scale)' : ''}`)}</title><rect class="bar-ok" x="${x}" y="${(y0 - okH).toFixed(1)}" width="${width}" height="${okH.toFixed(1)}"/><rect class="bar-fail" x="${x}" y="${(y0 - okH - failH).toFixed(1)}" width="${width}" height="${failH.toFixed(1)}"/>${mark}</g>`;
    })
    .join('');
  const first = perMinute[0] ? fmtTime(perMinute[0].minute).slice(11, 16) : '';
  const total = perMinute.reduce((a, m) => a + m.completed, 0);
  const failed = perMinute.reduce((a, m) => a + m.failed, 0);
  const tick = capped
    ? `${max}/min scale: 3 × the 90th percentile minute; ${capped} taller bar${capped === 1 ? '' : 's'} cut (peak ${peak}/min)`
    : `${max}/min`;
  return `<svg class="chart" viewBox="0 0 ${w} ${h}" role="img" aria-label="${esc(`${label}: ${total} completed, ${failed} failed in the last hour`)}" xmlns="http://www.w3.org/2000/svg"><line class="axis" x1="0" y1="${h - bottom}" x2="${w}" y2="${h - bottom}"/><text class="tick" x="2" y="10"${capped ? ' data-capped="1"' : ''}>${esc(tick)}</text>${bars}<text class="tick" x="2" y="${h - 4}">${esc(first)}</text><text class="tick" x="${w - 2}" y="${h - 4}" text-anchor="end">now</text></svg>`;
}

/** Sums the per-minute rates of several queues, minute by minute. */
export function sumRates(all: readonly (readonly MinuteRate[])[]): MinuteRate[] {
  const by = new Map<number, MinuteRate>();
  for (const rates of all) {
    for (const m of rates) {
      const cur = by.get(m.minute) ?? { minute: m.minute, completed: 0, failed: 0 };
      cur.completed += m.completed;
      cur.failed += m.failed;
      by.set(m.minute, cur);
    }
  }
  return [...by.values()].sort((a, b) => a.minute - b.minute);
}

// ── overview ──────────────────────────────────────────────────────────────────

export function overviewPage(ctx: PageContext, queues: readonly QueueSummary[], rates: MinuteRate[]): string {
  const head = JOB_STATES.map((s) => `<th class="num">${esc(s)}</th>`).join('');
  const rows = queues
    .map((s) => {
      const cells = JOB_STATES.map(
        (st) =>
          `<td class="num"><a data-count data-state="${esc(st)}" href="${esc(href(ctx, `/queues/${q(s.name)}`, { state: st }))}">${s.counts[st] ?? 0}</a>${capBadge(st, s.counts[st] ?? 0, s.kept)}</td>`,
      ).join('');
      return `<tr data-queue="${esc(s.name)}"><td><a class="qname" href="${esc(href(ctx, `/queues/${q(s.name)}`))}">${esc(s.name)}</a> <span class="badge paused" data-paused${s.paused ? '' : ' hidden'}>paused</span></td>${cells}<td class="num">${s.lanes ? `<a href="${esc(href(ctx, `/queues/${q(s.name)}/lanes`))}">${s.lanes}</a>` : 0}</td><td><a href="${esc(href(ctx, `/queues/${q(s.name)}`, { state: 'dead' }))}">dead letters</a> · <a href="${esc(href(ctx, `/queues/${q(s.name)}/schedulers`))}">schedulers</a></td></tr>`;
    })
    .join('\n');
  const table =
    queues.length === 0
      ? '<p class="empty">No queues yet: a queue is listed once it has run a script (an enqueue or a consumer).</p>'
      : `<table class="grid" id="queues"><thead><tr><th>queue</th>${head}<th class="num">lanes</th><th></th></tr></thead><tbody>${rows}</tbody></table>`;
  return layout(ctx, {
    title: 'Queues',
    page: 'overview',
    data: { queues: queues.map((s) => s.name).join('\n') },
    body: `<h1>Queues</h1>
<section class="card"><h2>Throughput, all queues, last 60 minutes</h2><div class="chart-box" data-chart="">${throughputSvg(rates, 'all queues')}</div><p class="legend"><span class="key ok"></span>completed <span class="key fail"></span>failed</p></section>
<section class="card">${table}</section>`,
  });
}

// ── one queue ─────────────────────────────────────────────────────────────────

export type QueuePageView = JobListing & { stats: QueueStats };

export function queuePage(ctx: PageContext, v: QueuePageView): string {
  const { stats } = v;
  const name = stats.name;
  const self = listHref(ctx, name, v);
  const tabs = JOB_STATES.map((st) => {
    const active = st === v.state && v.lane === undefined;
    return `<a class="tab${active ? ' active' : ''}" href="${esc(href(ctx, `/queues/${q(name)}`, { state: st }))}">${esc(st)} <span class="count" data-count data-state="${esc(st)}">${stats.counts[st] ?? 0}</span>${capBadge(st, stats.counts[st] ?? 0, stats.kept)}</a>`;
  }).join('');
  const laneTabs = stats.lanes
    .map((l) => {
      const active = v.lane === l.group;
      return `<a class="tab${active ? ' active' : ''}" href="${esc(href(ctx, `/queues/${q(name)}`, { state: 'pending', lane: l.group }))}">${esc(l.group)} <span class="count" data-lane-count="${esc(l.group)}">${l.pending}</span></a>`;
    })
    .join('');
  const lanes = laneTable(ctx, stats, self);
  const consumers =
    stats.consumers.length === 0
      ? '<p class="empty">No consumer sent a heartbeat in the last 10 minutes.</p>'
      : `<table class="grid"><thead><tr><th>consumer</th><th>host</th><th class="num">pid</th><th class="num">running / concurrency</th><th>last seen</th><th>state</th></tr></thead><tbody>${stats.consumers
          .map(
            (c) =>
              `<tr data-consumer="${esc(c.id)}" data-alive="${c.alive}"><td class="mono">${esc(c.id)}</td><td>${esc(c.host)}</td><td class="num">${c.pid}</td><td class="num">${c.running} / ${c.concurrency}</td><td>${fmtTime(c.lastSeen)}</td><td>${c.alive ? 'alive' : `<span class="badge dead">dead</span> no beat for ${Math.round(c.silentMs / 1000)} s (over ${STALE_BEATS} beats)`}</td></tr>`,
          )
          .join('')}</tbody></table>`;
  const recover =
    stats.expiredLeases > 0
      ? `<div class="warn" id="expired-leases">${stats.expiredLeases} active job(s) are past their lease deadline: their consumer died and no running consumer recovered them. ${form(
          ctx,
          href(ctx, `/queues/${q(name)}/recover`),
          'Recover them',
          self,
          { confirm: `Return ${stats.expiredLeases} job(s) with an expired lease to pending?` },
        )}</div>`
      : '';
  const r = stats.rates;
  return layout(ctx, {
    title: name,
    page: 'queue',
    data: {
      queue: name,
      state: v.state,
      lane: v.lane,
      tag: v.tag,
      name: v.name,
      error: v.error,
      text: v.text,
      offset: String(v.offset),
      limit: String(v.limit),
      self,
    },
    crumbs: [[name, null]],
    body: `<h1>${esc(name)} <span class="badge paused" data-paused${stats.paused ? '' : ' hidden'}>paused</span></h1>
<div class="toolbar" id="queue-controls">${queueControls(ctx, stats, v.state, self)}<a class="btn" href="${esc(href(ctx, `/queues/${q(name)}/schedulers`))}">Schedulers and repeats</a><a class="btn" href="${esc(href(ctx, `/queues/${q(name)}/lanes`))}">Lanes</a></div>
<section class="card"><h2>Throughput, last 60 minutes</h2><p class="stats"><span data-stat="completedLastHour">${r.completedLastHour}</span> completed · <span data-stat="failedLastHour">${r.failedLastHour}</span> failed attempts · failure rate <span data-stat="failureRate">${(r.failureRate * 100).toFixed(1)}</span>% · oldest waiting job: <span id="oldest-wait">${stats.oldestWaitingMs === null ? 'none waits' : `${Math.round(stats.oldestWaitingMs / 1000)} s`}</span></p><div class="chart-box" data-chart="${esc(name)}">${throughputSvg(r.perMinute, name)}</div></section>
<nav class="tabs" aria-label="states">${tabs}</nav>
${laneTabs ? `<nav class="tabs lanes" aria-label="lanes"><span class="tabs-label">lanes:</span>${laneTabs}</nav>` : ''}
${jobsSection(ctx, stats, v, self)}
<section class="card"><h2>Lanes</h2>${lanes}</section>
<section class="card"><h2>Consumers</h2>${recover}${consumers}</section>`,
  });
}

// ── one job: job-page.ts ──────────────────────────────────────────────────────

export { jobPage } from './job-page.js';

/** The queues that hold a job of one id (ids are unique per queue, not across queues). */
export function foundPage(ctx: PageContext, id: string, queues: readonly string[]): string {
  const items = queues
    .map(
      (name) => `<li><a href="${esc(href(ctx, `/queues/${q(name)}/jobs/${q(id)}`))}">${esc(name)}</a></li>`,
    )
    .join('');
  return layout(ctx, {
    title: id,
    page: 'found',
    body: `<h1>Job <span class="mono">${esc(id)}</span></h1><p>${queues.length} queues hold a job with this id:</p><ul id="found">${items}</ul>`,
  });
}

export function errorPage(ctx: PageContext, status: number, message: string): string {
  return layout(ctx, {
    title: `${status}`,
    page: 'error',
    body: `<h1>${status}</h1><p class="error-message">${esc(message)}</p><p><a href="${esc(href(ctx, '/'))}">Back to the queues</a></p>`,
  });
}
