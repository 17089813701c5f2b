// The dashboard's markup helpers: escaping, links, times, the page layout and action forms.
// Every value that comes from a queue passes through esc(): nothing a job carries is ever markup.
import type { JobState } from '../core/types.js';

export interface PageContext {
  /** The mount path links start with ('' at the root). */
  base: string;
  /** The CSRF token forms carry; null in read-only mode (no forms at all). */
  csrf: string | null;
}

/** Which states each job action applies to (the server enforces them again through the verbs). */
export const ACTION_STATES: Record<'promote' | 'retry' | 'cancel' | 'remove', readonly JobState[]> = {
  promote: ['scheduled'],
  retry: ['dead', 'cancelled', 'completed'],
  cancel: ['scheduled', 'pending', 'active'],
  remove: ['scheduled', 'pending', 'completed', 'dead', 'cancelled'],
};

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** Escapes text for HTML content and quoted attribute values. */
export function esc(value: unknown): string {
  return String(value ?? '').replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

/** Server-clock epoch ms as `YYYY-MM-DD HH:MM:SSZ`, or an em dash. */
export function fmtTime(ms: number | undefined | null): string {
  if (ms === undefined || ms === null || !Number.isFinite(ms) || ms <= 0) return '—';
  return new Date(ms)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, 'Z');
}

/** A value as indented JSON text (for a <pre>, escaped by the caller). */
export function pretty(value: unknown): string {
  if (value === undefined) return '';
  if (typeof value === 'string') return value;
  return JSON.stringify(value, null, 2) ?? String(value);
}

export function href(
  ctx: PageContext,
  path: string,
  query: Record<string, string | number | undefined> = {},
): string {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') qs.set(k, String(v));
  const s = qs.toString();
  return `${ctx.base}${path}${s ? `?${s}` : ''}`;
}

export const q = encodeURIComponent;

// ── layout ─────────────────────────────────────────────────────────────────────

export interface LayoutOptions {
  title: string;
  page: 'overview' | 'queue' | 'job' | 'schedulers' | 'lanes' | 'found' | 'error';
  data?: Record<string, string | undefined>;
  crumbs?: [string, string | null][];
  body: string;
}

export function layout(ctx: PageContext, o: LayoutOptions): string {
  const data = Object.entries({ page: o.page, ...o.data })
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => ` data-${k}="${esc(v)}"`)
    .join('');
  const crumbs = [['Queues', href(ctx, '/')] as [string, string | null], ...(o.crumbs ?? [])]
    .map(([label, link]) =>
      link ? `<a href="${esc(link)}">${esc(label)}</a>` : `<span>${esc(label)}</span>`,
    )
    .join('<span class="sep">/</span>');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(o.title)} · EchoMQ</title>
<link rel="icon" href="data:,">
<meta name="emq-base" content="${esc(ctx.base)}">
${ctx.csrf ? `<meta name="csrf-token" content="${esc(ctx.csrf)}">` : ''}
<link rel="stylesheet" href="${esc(href(ctx, '/assets/dashboard.css'))}">
<script src="${esc(href(ctx, '/assets/dashboard.js'))}" defer></script>
<script src="${esc(href(ctx, '/assets/ops.js'))}" defer></script>
</head>
<body${data}${ctx.csrf ? '' : ' data-read-only="1"'}>
<header class="top"><a class="brand" href="${esc(href(ctx, '/'))}">EchoMQ</a><nav class="crumbs">${crumbs}</nav>
<span id="live" class="live" title="live updates (server-sent events)">offline</span>${ctx.csrf ? '' : '<span class="badge">read-only</span>'}</header>
<main>
${o.body}
</main>
</body>
</html>
`;
}

export function form(
  ctx: PageContext,
  action: string,
  label: string,
  ret: string,
  opts: {
    danger?: boolean;
    states?: readonly string[];
    hidden?: boolean;
    confirm?: string;
    fields?: Record<string, string>;
    /** A long action: the page script posts it and follows its progress (tasks.ts). */
    task?: boolean;
  } = {},
): string {
  if (!ctx.csrf) return '';
  const attrs = [
    opts.states ? ` data-states="${esc(opts.states.join(' '))}"` : '',
    opts.hidden ? ' hidden' : '',
    opts.confirm ? ` data-confirm="${esc(opts.confirm)}"` : '',
    opts.task ? ' data-task="1"' : '',
  ].join('');
  const fields = Object.entries(opts.fields ?? {})
    .map(([k, v]) => `<input type="hidden" name="${esc(k)}" value="${esc(v)}">`)
    .join('');
  return `<form class="action" method="post" action="${esc(action)}"${attrs}><input type="hidden" name="_csrf" value="${esc(ctx.csrf)}"><input type="hidden" name="return" value="${esc(ret)}">${fields}<button type="submit" class="btn${opts.danger ? ' danger' : ''}" data-action="${esc(label.toLowerCase().replace(/\s+/g, '-'))}">${esc(label)}</button></form>`;
}

export function stateBadge(state: string, id?: string): string {
  return `<span${id ? ` id="${id}"` : ''} class="state state-${esc(state)}">${esc(state)}</span>`;
}

/**
 * A server-clock instant as a <time> element: UTC text that the page script turns into the
 * browser's local time and a relative one ("3 min ago"), keeping UTC in its title.
 */
export function timeTag(ms: number | undefined | null): string {
  const text = fmtTime(ms);
  if (text === '—') return text;
  return `<time datetime="${new Date(ms!).toISOString()}" data-ms="${ms}">${text}</time>`;
}

/** A duration in ms as the page shows it: 840 ms, 12.3 s, 4 min 05 s, 2 h 10 min. */
export function fmtDuration(ms: number | undefined | null): string {
  if (ms === undefined || ms === null || !Number.isFinite(ms) || ms < 0) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.floor(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ${String(Math.floor(s / 60) % 60).padStart(2, '0')} min`;
  return `${Math.floor(s / 86_400)} d ${Math.floor(s / 3600) % 24} h`;
}

/**
 * "at cap" beside an ended state's count, shown while the count has reached what the queue's
 * retention keeps (older ended jobs are deleted, so the count stops growing); the page script
 * toggles it as counts change.
 */
export function capBadge(state: JobState, count: number, kept: { completed: number; dead: number }): string {
  if (state !== 'completed' && state !== 'dead' && state !== 'cancelled') return '';
  const n = state === 'completed' ? kept.completed : kept.dead;
  return ` <span class="badge cap" data-cap="${state}" data-kept="${n}" title="${esc(`the queue keeps the newest ${n} ${state} jobs (retention): older ones are deleted, so this count stops here`)}"${count >= n ? '' : ' hidden'}>at cap ${n}</span>`;
}
