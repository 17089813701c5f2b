// What the CLI prints: tables for people (columns padded, numbers right-aligned, times as UTC
// plus "ago"), colour only on a terminal (FORCE_COLOR and NO_COLOR honoured), JSON for programs,
// and a progress bar for long work, always on stderr so stdout stays the result.
import type { AttemptRun } from '../core/attempts.js';
import { formatDuration } from '../core/duration.js';
import type { QueueEvent } from '../core/types.js';
import { JOB_STATES, type JobState, type JobView } from '../core/types.js';
import {
  type JobDetail,
  type ListedJob,
  type QueueStats,
  type QueueSummary,
  type SchedulersResult,
  STALE_BEATS,
} from '../inspect/inspector.js';

// ── output ──────────────────────────────────────────────────────────────────

export function write(text: string): void {
  process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
}

export function printJson(value: unknown): void {
  write(JSON.stringify(value, null, 2));
}

/** Columns padded to their widest cell; numbers right-aligned. */
function table(header: string[], rows: (string | number)[][]): string {
  const cells = [header, ...rows.map((r) => r.map(String))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells
    .map((r, j) =>
      r
        .map((cell, i) => {
          const numeric = j > 0 && typeof rows[j - 1]?.[i] === 'number';
          return numeric ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!);
        })
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** Adds a table of `rows` to `out`, unless there are none. */
function pushTable(out: string[], header: string[], rows: (string | number)[][]): void {
  if (rows.length > 0) out.push(table(header, rows));
}

export function when(ms: number | undefined): string {
  if (ms === undefined || ms < 0) return '-';
  return new Date(ms).toISOString().replace('T', ' ').replace('Z', '');
}

/** A span of time in its largest unit, rounded: 640ms, 12s, 15m, 3h, 2d. */
export function span(ms: number): string {
  const abs = Math.abs(ms);
  return abs < 1000
    ? `${Math.round(abs)}ms`
    : abs < 60_000
      ? `${Math.round(abs / 1000)}s`
      : abs < 3_600_000
        ? `${Math.round(abs / 60_000)}m`
        : abs < 86_400_000
          ? `${Math.round(abs / 3_600_000)}h`
          : `${Math.round(abs / 86_400_000)}d`;
}

function ago(ms: number | undefined): string {
  if (ms === undefined) return '-';
  const d = Date.now() - ms;
  return d >= 0 ? `${span(d)} ago` : `in ${span(d)}`;
}

function clip(text: string, max: number): string {
  const one = text.replace(/\s+/g, ' ');
  return one.length > max ? `${one.slice(0, max - 1)}…` : one;
}

const SPARK = '▁▂▃▄▅▆▇█';
function sparkline(values: number[]): string {
  const max = Math.max(...values);
  if (max === 0) return SPARK[0]!.repeat(values.length);
  return values
    .map((v) => SPARK[Math.min(SPARK.length - 1, Math.floor((v / max) * (SPARK.length - 1)))])
    .join('');
}

const useColour = (): boolean =>
  process.env.FORCE_COLOR !== undefined
    ? process.env.FORCE_COLOR !== '0'
    : process.stdout.isTTY === true && process.env.NO_COLOR === undefined;

const ANSI: Record<string, string> = {
  completed: '32',
  failed: '31',
  retries_exhausted: '1;31',
  active: '36',
  added: '34',
  waiting: '34',
  delayed: '33',
  stalled: '35',
  progress: '90',
  removed: '2',
  drained: '2',
  paused: '33',
  resumed: '33',
};

function paint(code: string | undefined, text: string): string {
  return code && useColour() ? `\u001b[${code}m${text}\u001b[0m` : text;
}

/** Progress of long work on stderr: a redrawn bar on a terminal, one plain line per step when piped. */
export function progress(label: string): { update(done: number, total: number): void; end(): void } {
  const tty = process.stderr.isTTY === true;
  let drawn = false;
  return {
    update(done, total) {
      const pct = total === 0 ? 100 : Math.floor((done / total) * 100);
      if (tty) {
        const width = 30;
        const filled = Math.round((Math.min(pct, 100) / 100) * width);
        process.stderr.write(
          `\r${label} [${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${done}/${total} ${pct}%`,
        );
        drawn = true;
      } else {
        process.stderr.write(`${label} ${done}/${total} (${pct}%)\n`);
      }
    },
    end() {
      if (drawn) process.stderr.write('\n');
    },
  };
}

// ── rendering jobs, queues and events ───────────────────────────────────────

const TIME_COLUMN: Record<JobState, [string, (j: JobView) => number | undefined]> = {
  scheduled: ['RUN AT', (j) => j.runAt],
  pending: ['CREATED', (j) => j.createdAt],
  active: ['STARTED', (j) => j.startedAt],
  completed: ['FINISHED', (j) => j.finishedAt],
  dead: ['FINISHED', (j) => j.finishedAt],
  cancelled: ['FINISHED', (j) => j.finishedAt],
  waiting_children: ['CREATED', (j) => j.createdAt],
};

/** An active job's lease: its deadline, flagged EXPIRED once it passed (nobody recovered it yet). */
export function leaseText(j: ListedJob): string {
  if (j.leaseUntil === undefined) return '-';
  return j.leaseExpired
    ? `EXPIRED ${ago(j.leaseUntil)}`
    : `until ${when(j.leaseUntil)} (${ago(j.leaseUntil)})`;
}

export function jobsTable(state: JobState, jobs: ListedJob[]): string {
  const [label, time] = TIME_COLUMN[state];
  const rows = jobs.map((j) => [
    j.id,
    j.name ?? '-',
    j.group ?? '-',
    `${j.attempts}/${j.maxAttempts}`,
    `${when(time(j))} (${ago(time(j))})`,
    state === 'active' ? leaseText(j) : j.error ? clip(j.error.message, 60) : '',
  ]);
  const last = state === 'active' ? 'LEASE' : state === 'dead' ? 'ERROR' : '';
  return table(['ID', 'NAME', 'GROUP', 'ATTEMPTS', label, last], rows);
}

/** How long the job next in line has waited: '-' when none waits. */
export function waitText(ms: number | null | undefined): string {
  return ms === null || ms === undefined ? '-' : span(ms);
}

/** The queues with their counts per state, lanes, the oldest wait and whether paused. */
export function queuesTable(queues: readonly QueueSummary[]): string {
  return table(
    ['QUEUE', ...JOB_STATES.map((st) => st.toUpperCase()), 'LANES', 'OLDEST WAIT', 'PAUSED'],
    queues.map((q) => [
      q.name,
      ...JOB_STATES.map((st) => q.counts[st]),
      q.lanes,
      waitText(q.oldestWaitingMs),
      q.paused ? 'yes' : '',
    ]),
  );
}

/** One event as a line of JSON (for `tail --json`): its stream id, the server's ms, and the rest. */
export function eventJson(e: QueueEvent): string {
  const time = Number(e.streamId.split('-')[0]);
  return JSON.stringify({ streamId: e.streamId, time, event: e.event, id: e.id, fields: e.fields });
}

/** One event as a line for people: the server's time of day, the event (coloured), the job, the fields. */
export function eventLine(e: QueueEvent): string {
  const ms = Number(e.streamId.split('-')[0]);
  const time = new Date(ms).toISOString().slice(11, 23);
  const rest = Object.entries(e.fields)
    .map(([k, v]) => `${k}=${clip(v, 80)}`)
    .join(' ');
  return `${time}  ${paint(ANSI[e.event], e.event.padEnd(17))} ${e.id || '-'}${rest ? `  ${rest}` : ''}`;
}

export function jobDetail(j: JobDetail): string {
  const lines = [`${j.id}  ${j.state}${j.name ? `  (${j.name})` : ''}`];
  const field = (k: string, v: string | undefined) => {
    if (v !== undefined) lines.push(`  ${k.padEnd(11)} ${v}`);
  };
  field('attempts', `${j.attempts}/${j.maxAttempts}${j.stalled > 0 ? `, stalled ${j.stalled}x` : ''}`);
  field('group', j.group);
  field('priority', j.priority === undefined ? undefined : String(j.priority));
  field('created', `${when(j.createdAt)} (${ago(j.createdAt)})`);
  field('run at', j.runAt === undefined ? undefined : `${when(j.runAt)} (${ago(j.runAt)})`);
  field('started', j.startedAt === undefined ? undefined : `${when(j.startedAt)} (${ago(j.startedAt)})`);
  field('finished', j.finishedAt === undefined ? undefined : `${when(j.finishedAt)} (${ago(j.finishedAt)})`);
  if (j.leaseUntil !== undefined) field('lease', leaseText(j));
  field('consumer', j.consumer);
  if (j.cancelRequested) field('cancel', 'requested');
  field('data', clip(JSON.stringify(j.data) ?? 'null', 200));
  if (j.progress !== undefined) field('progress', clip(JSON.stringify(j.progress), 200));
  if (j.result !== undefined) field('result', clip(JSON.stringify(j.result) ?? 'null', 200));
  if (j.error) field('error', j.error.message);
  if (j.lastError) field('last error', j.lastError.message);
  if (j.error?.stack) lines.push('  stack', ...j.error.stack.split('\n').map((l) => `    ${l}`));
  if (j.flow) lines.push(...flowLines(j.flow));
  if (j.runs.length > 0) {
    lines.push(`attempts${j.runsPartial ? ' (earlier ones are no longer in the stream)' : ''}`);
    lines.push(indent(runsTable(j.runs)));
  }
  if (j.logCount > 0) {
    const part = j.logs.length < j.logCount ? `, the newest ${j.logs.length}` : '';
    lines.push(`logs (${j.logCount} lines${part}; all of them: echomq logs)`);
    for (const l of j.logs) lines.push(`  ${l}`);
  }
  lines.push(
    `history (${j.history.length} events still in the stream${j.historyTruncated ? ', newest part' : ''})`,
  );
  for (const e of j.history) lines.push(`  ${eventLine(e)}`);
  return lines.join('\n');
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((l) => `  ${l}`)
    .join('\n');
}

/** A job's attempts (core/attempts.ts), oldest first: who ran each, how long it waited and ran, how it ended. */
export function runsTable(runs: readonly AttemptRun[]): string {
  return table(
    ['#', 'CONSUMER', 'STARTED', 'WAITED', 'RAN', 'OUTCOME', 'ERROR'],
    runs.map((r) => [
      r.attempt,
      r.consumer ?? '-',
      when(r.startedAt),
      r.waitMs === undefined ? '-' : span(r.waitMs),
      r.runMs === undefined ? '-' : span(r.runMs),
      r.reason ? `${r.outcome} (${r.reason})` : r.outcome,
      r.error ? clip(r.error, 60) : '',
    ]),
  );
}

/** A flow job's parent and the children the detail holds, each with where it stands. */
function flowLines(flow: NonNullable<JobDetail['flow']>): string[] {
  const out: string[] = [];
  if (flow.parent) out.push(`  parent      ${flow.parent.id} (queue ${flow.parent.queue})`);
  const { processed, pending, cursor } = flow.children;
  if (processed.length + pending.length === 0) return out;
  out.push(
    `children (${processed.length} processed, ${pending.length} pending${cursor > 0 ? ', more: echomq flow' : ''})`,
  );
  for (const d of processed) {
    const how = d.failure
      ? `: ${clip(d.failure, 60)}`
      : d.result === undefined
        ? ''
        : ` -> ${clip(JSON.stringify(d.result) ?? 'null', 60)}`;
    out.push(`  ${d.id}  ${d.queue}  processed${how}`);
  }
  for (const d of pending) out.push(`  ${d.id}  ${d.queue}  pending`);
  return out;
}

export function statsText(st: QueueStats): string {
  const out = [`queue ${st.name}${st.paused ? '  (paused)' : ''}`];
  out.push(
    `oldest waiting job: ${st.oldestWaitingMs === null ? 'none waits' : `waited ${waitText(st.oldestWaitingMs)}`}`,
  );
  out.push(
    table(
      ['STATE', 'JOBS'],
      JOB_STATES.map((state) => [state, st.counts[state]]),
    ),
  );
  if (st.lanes.length > 0) {
    out.push('', 'lanes');
    out.push(
      table(
        ['GROUP', 'PENDING', 'OLDEST WAIT', 'RUNNING', 'CONCURRENCY', 'RATE', 'PAUSED'],
        st.lanes.map((l) => [
          l.group,
          l.pending,
          waitText(st.lanesOldestWaitingMs[l.group]),
          l.running,
          l.concurrency === 0 ? 'unlimited' : l.concurrency,
          l.rateLimit ? `${l.rateLimit.max}/${formatDuration(l.rateLimit.perMs)}` : '-',
          l.paused ? 'yes' : '',
        ]),
      ),
    );
  }
  const r = st.rates;
  out.push(
    '',
    'last hour',
    `  completed ${r.completedLastHour}  failed ${r.failedLastHour}  failure rate ${(r.failureRate * 100).toFixed(1)}%`,
    `  completed/min ${sparkline(r.perMinute.map((m) => m.completed))}`,
    `  failed/min    ${sparkline(r.perMinute.map((m) => m.failed))}`,
  );
  if (st.expiredLeases > 0) {
    out.push(
      '',
      `expired leases: ${st.expiredLeases} active job(s) past their lease deadline — \`echomq recover ${st.name}\` returns them to pending`,
    );
  }
  const dead = st.consumers.filter((c) => !c.alive).length;
  out.push(
    '',
    `consumers (seen in the last 10 minutes): ${st.consumers.length - dead} alive${dead > 0 ? `, ${dead} dead (no beat for ${STALE_BEATS} beats)` : ''}`,
  );
  pushTable(
    out,
    ['ID', 'HOST', 'PID', 'RUNNING', 'LAST SEEN', 'STATE'],
    st.consumers.map((c) => [
      c.id,
      c.host,
      c.pid,
      `${c.running}/${c.concurrency}`,
      ago(c.lastSeen),
      c.alive ? 'alive' : `dead (silent ${span(c.silentMs)}, > ${STALE_BEATS} beats of ${span(c.beatMs)})`,
    ]),
  );
  return out.join('\n');
}

export function schedulersText(r: SchedulersResult): string {
  const out: string[] = [];
  out.push(`repeats: ${r.repeats.length}`);
  pushTable(
    out,
    ['NAME', 'EVERY', 'NEXT RUN', 'RUNS'],
    r.repeats.map((x) => [
      x.name,
      x.everyMs === undefined ? '-' : formatDuration(x.everyMs),
      `${when(x.nextRunAt)} (${ago(x.nextRunAt)})`,
      x.runs,
    ]),
  );
  out.push('', `schedulers: ${r.schedulers.length}`);
  pushTable(
    out,
    ['ID', 'REPEAT', 'NEXT RUN', 'RUNS'],
    r.schedulers.map((x) => [
      x.id,
      x.pattern !== undefined
        ? `${x.pattern}${x.tz ? ` (${x.tz})` : ''}`
        : x.every !== undefined
          ? `every ${formatDuration(x.every)}`
          : '-',
      x.nextRunAt < 0
        ? `ended${x.ended ? ` (${x.ended})` : ''}`
        : `${when(x.nextRunAt)} (${ago(x.nextRunAt)})`,
      x.iterationCount ?? 0,
    ]),
  );
  return out.join('\n');
}
