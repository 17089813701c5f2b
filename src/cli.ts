#!/usr/bin/env node
// The `echomq` command: a terminal onto the queues on one Redis, reading through the Inspector
// and writing only through the Queue's verbs. A run, in order:
//   1. parse   — commander reads the command line; a usage error exits 1
//   2. connect — one connection to --url / REDIS_URL; no answer exits 3 and says what to do
//   3. act     — the command reads (Inspector) or calls one verb (Queue)
//   4. print   — a table for people, or JSON with --json; exit 0, 2 when something is not found
// Long work (retry --all-dead, clean) shows a progress bar on a terminal and plain lines when piped,
// always on stderr so stdout stays the result.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { Redis } from 'ioredis';
import { formatDuration, parseDuration } from './duration.js';
import { EchoMQ } from './echomq.js';
import { EchoMQError } from './errors.js';
import type { QueueEvent } from './events.js';
import { isJobId } from './ids.js';
import { Inspector, type JobDetail, QUEUES_KEY, type QueueStats, type SchedulersResult } from './inspect.js';
import { type EnqueueOptions, JOB_STATES, type JobState, type JobView } from './jobs.js';

/** Exit codes: what a script calling the CLI can switch on. */
export const EXIT = { ok: 0, usage: 1, notFound: 2, noServer: 3 } as const;

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const DEFAULT_URL = 'redis://127.0.0.1:6379';

/** A failure with the exit code and a message that says what to do. */
export class CliError extends Error {
  constructor(
    readonly exitCode: number,
    message: string,
  ) {
    super(message);
  }
}

interface Globals {
  url?: string;
  json?: boolean;
}

// ── output ──────────────────────────────────────────────────────────────────

function write(text: string): void {
  process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
}

function printJson(value: unknown): void {
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

function when(ms: number | undefined): string {
  if (ms === undefined || ms < 0) return '-';
  return new Date(ms).toISOString().replace('T', ' ').replace('Z', '');
}

function ago(ms: number | undefined): string {
  if (ms === undefined) return '-';
  const d = Date.now() - ms;
  const abs = Math.abs(d);
  const span =
    abs < 1000
      ? `${abs}ms`
      : abs < 60_000
        ? `${Math.round(abs / 1000)}s`
        : abs < 3_600_000
          ? `${Math.round(abs / 60_000)}m`
          : abs < 86_400_000
            ? `${Math.round(abs / 3_600_000)}h`
            : `${Math.round(abs / 86_400_000)}d`;
  return d >= 0 ? `${span} ago` : `in ${span}`;
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
function progress(label: string): { update(done: number, total: number): void; end(): void } {
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

// ── connecting ──────────────────────────────────────────────────────────────

function urlOf(g: Globals): string {
  return g.url ?? process.env.REDIS_URL ?? DEFAULT_URL;
}

/** The URL without its password, for messages. */
function shown(url: string): string {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@');
}

function isConnectionError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: string }).code ?? '';
  return (
    ['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'ETIMEDOUT', 'EHOSTUNREACH', 'EPIPE'].includes(code) ||
    err.name === 'MaxRetriesPerRequestError' ||
    /Connection is closed|connect ETIMEDOUT|Stream isn't writeable/.test(err.message)
  );
}

interface Session {
  mq: EchoMQ;
  inspector: Inspector;
  url: string;
  close(): Promise<void>;
}

/**
 * One connection for the run. Before the first answer a refused server fails fast (three
 * tries); once connected, a dropped connection is retried (so `tail` survives a restart).
 */
async function connect(url: string): Promise<Session> {
  let ready = false;
  let lastError: Error | undefined;
  const client = new Redis(url, {
    connectTimeout: 3000,
    maxRetriesPerRequest: 2,
    retryStrategy: (times) => (ready ? Math.min(times * 200, 2000) : times > 2 ? null : 200),
  });
  client.on('error', (err: Error) => {
    lastError = err;
  });
  client.once('ready', () => {
    ready = true;
  });
  let mq: EchoMQ;
  try {
    mq = await EchoMQ.connect({ redis: client });
  } catch (err) {
    client.disconnect();
    const reason = (lastError ?? (err as Error)).message;
    throw new CliError(
      EXIT.noServer,
      `cannot reach Redis at ${shown(url)} (${reason}) — start redis-server, or pass --url redis://host:port (or set REDIS_URL)`,
    );
  }
  return {
    mq,
    inspector: new Inspector(mq),
    url,
    async close() {
      await mq.close();
      await client.quit().catch(() => client.disconnect());
    },
  };
}

async function withSession<T>(g: Globals, fn: (s: Session) => Promise<T>): Promise<T> {
  const session = await connect(urlOf(g));
  try {
    return await fn(session);
  } finally {
    await session.close();
  }
}

async function requireQueue(s: Session, queue: string): Promise<void> {
  if (await s.inspector.has(queue)) return;
  const known = (await s.mq.connector.client.smembers(QUEUES_KEY)).sort();
  throw new CliError(
    EXIT.notFound,
    `no queue ${JSON.stringify(queue)} on ${shown(s.url)}${known.length > 0 ? ` (queues: ${known.slice(0, 10).join(', ')}${known.length > 10 ? ', …' : ''})` : ' (it has no queues yet)'} — \`echomq queues\` lists them`,
  );
}

/**
 * A command's usual course: in a session (on `queue`, which must exist, when one is given), `run`
 * reads or changes something, and its value is printed as JSON under --json, else as `human` says.
 */
async function report<T>(
  g: Globals,
  queue: string | undefined,
  run: (s: Session) => Promise<T>,
  human: (value: T, s: Session) => string,
): Promise<void> {
  await withSession(g, async (s) => {
    if (queue !== undefined) await requireQueue(s, queue);
    const value = await run(s);
    if (g.json) return printJson(value);
    write(human(value, s));
  });
}

function noJob(queue: string, id: string): never {
  throw new CliError(EXIT.notFound, `no job ${id} in queue ${queue}`);
}

function requireJobId(queue: string, id: string): void {
  if (!isJobId(id)) {
    throw new CliError(
      EXIT.notFound,
      `no job ${JSON.stringify(id)} in queue ${queue}: job ids start with JOB — \`echomq jobs ${queue}\` lists them`,
    );
  }
}

// ── argument parsers ────────────────────────────────────────────────────────

function wholeArg(min: number, max = Number.MAX_SAFE_INTEGER) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`expected a whole number from ${min} to ${max}`);
    }
    return n;
  };
}

function durationArg(value: string): number {
  try {
    return parseDuration(value);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message.replace(/^EMQINPUT: /, ''));
  }
}

/** An instant: epoch ms, or an ISO 8601 date. */
function instantArg(value: string): number {
  const n = /^\d+$/.test(value) ? Number(value) : Date.parse(value);
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new InvalidArgumentError('expected epoch ms or an ISO date, e.g. 2030-01-01T09:00:00Z');
  }
  return n;
}

function fromArg(value: string): string {
  if (!/^(\$|\d+(-\d+)?)$/.test(value)) {
    throw new InvalidArgumentError("expected '$' (new events only), 0 (replay the stream) or a stream id");
  }
  return value;
}

// ── rendering jobs ──────────────────────────────────────────────────────────

const TIME_COLUMN: Record<JobState, [string, (j: JobView) => number | undefined]> = {
  scheduled: ['RUN AT', (j) => j.runAt],
  pending: ['CREATED', (j) => j.createdAt],
  active: ['STARTED', (j) => j.startedAt],
  completed: ['FINISHED', (j) => j.finishedAt],
  dead: ['FINISHED', (j) => j.finishedAt],
  cancelled: ['FINISHED', (j) => j.finishedAt],
  waiting_children: ['CREATED', (j) => j.createdAt],
};

function jobsTable(state: JobState, jobs: JobView[]): string {
  const [label, time] = TIME_COLUMN[state];
  const rows = jobs.map((j) => [
    j.id,
    j.name ?? '-',
    j.group ?? '-',
    `${j.attempts}/${j.maxAttempts}`,
    `${when(time(j))} (${ago(time(j))})`,
    j.error ? clip(j.error.message, 60) : '',
  ]);
  return table(['ID', 'NAME', 'GROUP', 'ATTEMPTS', label, state === 'dead' ? 'ERROR' : ''], rows);
}

function eventLine(e: QueueEvent): string {
  const ms = Number(e.streamId.split('-')[0]);
  const time = new Date(ms).toISOString().slice(11, 23);
  const rest = Object.entries(e.fields)
    .map(([k, v]) => `${k}=${clip(v, 80)}`)
    .join(' ');
  return `${time}  ${paint(ANSI[e.event], e.event.padEnd(17))} ${e.id || '-'}${rest ? `  ${rest}` : ''}`;
}

function jobDetail(j: JobDetail): string {
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
  if (j.cancelRequested) field('cancel', 'requested');
  field('data', clip(JSON.stringify(j.data) ?? 'null', 200));
  if (j.progress !== undefined) field('progress', clip(JSON.stringify(j.progress), 200));
  if (j.result !== undefined) field('result', clip(JSON.stringify(j.result) ?? 'null', 200));
  if (j.error) field('error', j.error.message);
  if (j.lastError) field('last error', j.lastError.message);
  if (j.error?.stack) lines.push('  stack', ...j.error.stack.split('\n').map((l) => `    ${l}`));
  lines.push(
    `history (${j.history.length} events still in the stream${j.historyTruncated ? ', newest part' : ''})`,
  );
  for (const e of j.history) lines.push(`  ${eventLine(e)}`);
  return lines.join('\n');
}

function statsText(st: QueueStats): string {
  const out = [`queue ${st.name}${st.paused ? '  (paused)' : ''}`];
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
        ['GROUP', 'PENDING', 'RUNNING', 'CONCURRENCY', 'RATE', 'PAUSED'],
        st.lanes.map((l) => [
          l.group,
          l.pending,
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
  out.push('', `consumers (seen in the last 10 minutes): ${st.consumers.length}`);
  pushTable(
    out,
    ['ID', 'HOST', 'PID', 'RUNNING', 'LAST SEEN'],
    st.consumers.map((c) => [c.id, c.host, c.pid, `${c.running}/${c.concurrency}`, ago(c.lastSeen)]),
  );
  return out.join('\n');
}

function schedulersText(r: SchedulersResult): string {
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

// ── the program ─────────────────────────────────────────────────────────────

function version(): string {
  try {
    return (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return '0.0.0';
  }
}

/** Builds the command tree; `main` runs it. */
export function buildProgram(): Command {
  const program = new Command('echomq')
    .description('Inspect and operate EchoMQ queues on a Redis server.')
    .version(version())
    .option('--url <url>', `Redis to talk to (default: $REDIS_URL, then ${DEFAULT_URL})`)
    .option('--json', 'print JSON (for programs) instead of tables')
    .configureHelp({ showGlobalOptions: true })
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();

  const globals = (cmd: Command): Globals => cmd.optsWithGlobals() as Globals;

  /** `echomq <name> <queue> <id>`: `run` on one job (its id checked first) in a session. */
  const jobCommand = <T>(
    name: string,
    description: string,
    run: (s: Session, queue: string, id: string) => Promise<T>,
    human: (value: T) => string,
  ): void => {
    program
      .command(name)
      .description(description)
      .argument('<queue>')
      .argument('<id>')
      .action(async (queue: string, id: string, _opts, cmd: Command) => {
        requireJobId(queue, id);
        await report(globals(cmd), undefined, (s) => run(s, queue, id), human);
      });
  };

  /** `echomq <name> <queue>`: one view of a queue that must exist, read in a session. */
  const queueView = <T>(
    name: string,
    description: string,
    read: (s: Session, queue: string) => Promise<T>,
    human: (value: T) => string,
  ): void => {
    program
      .command(name)
      .description(description)
      .argument('<queue>')
      .action(async (queue: string, _opts, cmd: Command) => {
        await report(globals(cmd), queue, (s) => read(s, queue), human);
      });
  };

  program
    .command('queues')
    .description('list the queues with their job counts')
    .action(async (_opts, cmd: Command) => {
      await report(
        globals(cmd),
        undefined,
        (s) => s.inspector.queues(),
        (queues, s) => {
          if (queues.length === 0) return `no queues on ${shown(s.url)} yet — enqueue a job to make one`;
          return table(
            ['QUEUE', ...JOB_STATES.map((st) => st.toUpperCase()), 'LANES', 'PAUSED'],
            queues.map((q) => [
              q.name,
              ...JOB_STATES.map((st) => q.counts[st]),
              q.lanes,
              q.paused ? 'yes' : '',
            ]),
          );
        },
      );
    });

  queueView(
    'stats',
    'counts per state and lane, rates of the last hour, consumers',
    (s, queue) => s.inspector.stats(queue),
    statsText,
  );

  program
    .command('jobs')
    .description('a page of jobs in one state (newest first for completed, dead, cancelled)')
    .argument('<queue>')
    .addOption(new Option('--state <state>', 'the state to list').choices(JOB_STATES).default('pending'))
    .option('--limit <n>', 'jobs per page (1-1000)', wholeArg(1, 1000), 20)
    .option('--offset <n>', 'jobs to skip', wholeArg(0), 0)
    .option('--group <group>', 'with --state pending: only this lane')
    .action(
      async (
        queue: string,
        opts: { state: JobState; limit: number; offset: number; group?: string },
        cmd,
      ) => {
        const g = globals(cmd as Command);
        if (opts.group !== undefined && opts.state !== 'pending') {
          throw new CliError(
            EXIT.usage,
            '--group applies to --state pending only (a lane holds waiting jobs)',
          );
        }
        await withSession(g, async (s) => {
          await requireQueue(s, queue);
          const page = await s.inspector.jobs(queue, opts.state, {
            offset: opts.offset,
            limit: opts.limit,
            ...(opts.group === undefined ? {} : { group: opts.group }),
          });
          if (g.json) return printJson({ ...page, offset: opts.offset, limit: opts.limit });
          const where = `${opts.state}${opts.group ? ` in lane ${opts.group}` : ''}`;
          if (page.jobs.length === 0) {
            return write(
              `no ${where} jobs in queue ${queue}${page.total > 0 ? ` past offset ${opts.offset}` : ''}`,
            );
          }
          const last = opts.offset + page.jobs.length;
          write(`${where}: ${opts.offset + 1}-${last} of ${page.total}`);
          write(jobsTable(opts.state, page.jobs));
          if (last < page.total) write(`next page: --offset ${last}`);
        });
      },
    );

  jobCommand(
    'job',
    'one job: its row and its events still in the stream',
    async (s, queue, id) => (await s.inspector.job(queue, id)) ?? noJob(queue, id),
    jobDetail,
  );

  program
    .command('retry')
    .description('return a dead or cancelled job to pending (attempts reset), or all dead ones')
    .argument('<queue>')
    .argument('[id]')
    .option('--all-dead', 'retry every dead job')
    .option('--all-cancelled', 'retry every cancelled job')
    .option('--batch <n>', 'jobs per script call with --all-*', wholeArg(1, 10_000), 500)
    .action(
      async (
        queue: string,
        id: string | undefined,
        opts: { allDead?: boolean; allCancelled?: boolean; batch: number },
        cmd,
      ) => {
        const g = globals(cmd as Command);
        const all = opts.allDead ? 'dead' : opts.allCancelled ? 'cancelled' : undefined;
        if ((id === undefined) === (all === undefined) || (opts.allDead && opts.allCancelled)) {
          throw new CliError(EXIT.usage, 'give a job id or one of --all-dead, --all-cancelled (not both)');
        }
        if (id !== undefined) requireJobId(queue, id);
        await withSession(g, async (s) => {
          const q = s.mq.queue(queue);
          if (id !== undefined) {
            await q.retry(id);
            return g.json
              ? printJson({ id, status: 'retried' })
              : write(`retried ${id}: it is pending again`);
          }
          await requireQueue(s, queue);
          const bar = progress(`retrying ${all} jobs`);
          let total = 0;
          const retried = await q.retryAll({
            state: all,
            batch: opts.batch,
            onProgress: (p) => {
              total = p.total;
              bar.update(p.retried, p.total);
            },
          });
          bar.end();
          if (g.json) return printJson({ state: all, retried, total });
          write(
            retried === 0
              ? `no ${all} jobs in queue ${queue}`
              : `retried ${retried} ${all} jobs in queue ${queue}`,
          );
        });
      },
    );

  jobCommand(
    'cancel',
    'cancel a waiting job, or ask a running one to stop',
    async (s, queue, id) => ({ id, status: await s.mq.queue(queue).cancel(id) }),
    ({ id, status }) =>
      status === 'cancelled'
        ? `cancelled ${id}`
        : `asked ${id} to stop: it is running and ends cancelled at its next lease checkpoint`,
  );

  jobCommand(
    'remove',
    'delete a job that is not running',
    async (s, queue, id) => {
      if (!(await s.mq.queue(queue).remove(id))) noJob(queue, id);
      return { id, status: 'removed' };
    },
    ({ id }) => `removed ${id}`,
  );

  for (const verb of ['pause', 'resume'] as const) {
    program
      .command(verb)
      .description(
        verb === 'pause'
          ? 'stop claiming from a queue (or one lane); running jobs finish'
          : 'let consumers claim from a queue (or one lane) again',
      )
      .argument('<queue>')
      .option('--group <group>', 'only this lane')
      .action(async (queue: string, opts: { group?: string }, cmd: Command) => {
        const g = globals(cmd);
        await withSession(g, async (s) => {
          const q = s.mq.queue(queue);
          const changed =
            opts.group === undefined
              ? await (verb === 'pause' ? q.pause() : q.resume())
              : await (verb === 'pause' ? q.lanes.pause(opts.group) : q.lanes.resume(opts.group));
          const what = opts.group === undefined ? `queue ${queue}` : `lane ${opts.group} of queue ${queue}`;
          const done = verb === 'pause' ? 'paused' : 'resumed';
          if (g.json) return printJson({ queue, group: opts.group ?? null, status: done, changed });
          write(
            changed ? `${done} ${what}` : `${what} was ${verb === 'pause' ? 'already paused' : 'not paused'}`,
          );
        });
      });
  }

  program
    .command('clean')
    .description('delete ended jobs of one state, oldest first')
    .argument('<queue>')
    .addOption(
      new Option('--state <state>', 'the ended state to clean')
        .choices(['completed', 'dead', 'cancelled'])
        .default('completed'),
    )
    .option(
      '--older-than <duration>',
      'only jobs that ended at least this long ago (e.g. 1h, 7d)',
      durationArg,
      0,
    )
    .option('--limit <n>', 'delete at most this many', wholeArg(1), 1000)
    .option('--batch <n>', 'jobs per script call', wholeArg(1, 100_000), 1000)
    .action(
      async (
        queue: string,
        opts: { state: 'completed' | 'dead' | 'cancelled'; olderThan: number; limit: number; batch: number },
        cmd: Command,
      ) => {
        const g = globals(cmd);
        await withSession(g, async (s) => {
          await requireQueue(s, queue);
          const q = s.mq.queue(queue);
          const target = Math.min(
            opts.limit,
            await s.inspector.countEnded(queue, opts.state, opts.olderThan),
          );
          const bar = progress(`cleaning ${opts.state} jobs`);
          let deleted = 0;
          while (deleted < target) {
            const n = await q.clean({
              state: opts.state,
              olderThanMs: opts.olderThan,
              limit: Math.min(opts.batch, target - deleted),
            });
            if (n === 0) break; // the rest went meanwhile (retried, trimmed, cleaned elsewhere)
            deleted += n;
            bar.update(deleted, target);
          }
          bar.end();
          if (g.json) return printJson({ state: opts.state, deleted });
          const age = opts.olderThan > 0 ? ` that ended over ${formatDuration(opts.olderThan)} ago` : '';
          write(
            deleted === 0
              ? `no ${opts.state} jobs${age} in queue ${queue}`
              : `deleted ${deleted} ${opts.state} jobs${age} from queue ${queue}`,
          );
        });
      },
    );

  queueView(
    'schedulers',
    'fixed cadences (repeat) and job schedulers, soonest next run first',
    (s, queue) => s.inspector.schedulers(queue),
    schedulersText,
  );

  program
    .command('tail')
    .description('follow the events of a queue live (Ctrl-C to stop)')
    .argument('<queue>')
    .option(
      '--from <id>',
      "'$' new events only, 0 to replay the stream, or a stream id to resume after",
      fromArg,
      '$',
    )
    .option('--count <n>', 'exit after this many events', wholeArg(1))
    .action(async (queue: string, opts: { from: string; count?: number }, cmd: Command) => {
      const g = globals(cmd);
      await withSession(g, async (s) => {
        const events = s.mq.queue(queue).events({ from: opts.from, blockMs: 1000 });
        const it = events[Symbol.asyncIterator](); // before ready: no event can slip past
        const stop = () => void events.close();
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
        try {
          await events.ready;
          process.stderr.write(`following queue ${queue} after ${events.position} — Ctrl-C to stop\n`);
          let seen = 0;
          for (let r = await it.next(); !r.done; r = await it.next()) {
            const e = r.value;
            if (g.json) {
              const time = Number(e.streamId.split('-')[0]);
              write(
                JSON.stringify({ streamId: e.streamId, time, event: e.event, id: e.id, fields: e.fields }),
              );
            } else write(eventLine(e));
            seen += 1;
            if (opts.count !== undefined && seen >= opts.count) break;
          }
        } finally {
          process.off('SIGINT', stop);
          process.off('SIGTERM', stop);
          await it.return?.();
          await events.close();
        }
      });
    });

  program
    .command('enqueue')
    .description('add a job (now, after --in, or at --at)')
    .argument('<queue>')
    .option('--data <json>', 'the job data as JSON', '{}')
    .option('--in <duration>', 'run after this long (500ms, 5s, 10m, 1h), on the server clock', durationArg)
    .option('--at <when>', 'run at this instant: epoch ms or an ISO date', instantArg)
    .option('--name <name>', 'the job name')
    .option('--group <group>', 'the lane to wait in')
    .option('--priority <n>', 'lower runs first; 0 (default) before any', wholeArg(0))
    .option('--attempts <n>', 'times the job may start, retries included', wholeArg(1))
    .option('--id <id>', 'your own job id (starts with JOB); enqueue is idempotent on it')
    .action(
      async (
        queue: string,
        opts: {
          data: string;
          in?: number;
          at?: number;
          name?: string;
          group?: string;
          priority?: number;
          attempts?: number;
          id?: string;
        },
        cmd: Command,
      ) => {
        const g = globals(cmd);
        if (opts.in !== undefined && opts.at !== undefined) {
          throw new CliError(EXIT.usage, 'give --in or --at, not both');
        }
        let data: unknown;
        try {
          data = JSON.parse(opts.data);
        } catch (err) {
          throw new CliError(
            EXIT.usage,
            `--data is not JSON (${(err as Error).message}); quote it for the shell, e.g. --data '{"to":"a@b.c"}'`,
          );
        }
        const jobOpts: EnqueueOptions = {};
        if (opts.id !== undefined) jobOpts.id = opts.id;
        if (opts.name !== undefined) jobOpts.name = opts.name;
        if (opts.group !== undefined) jobOpts.group = opts.group;
        if (opts.priority !== undefined) jobOpts.priority = opts.priority;
        if (opts.attempts !== undefined) jobOpts.attempts = opts.attempts;
        await withSession(g, async (s) => {
          const q = s.mq.queue(queue);
          const r =
            opts.in !== undefined
              ? await q.enqueueIn(data, opts.in, jobOpts)
              : opts.at !== undefined
                ? await q.enqueueAt(data, opts.at, jobOpts)
                : await q.enqueue(data, jobOpts);
          if (g.json) return printJson(r);
          const how =
            opts.in !== undefined
              ? ` to run in ${formatDuration(opts.in)}`
              : opts.at !== undefined
                ? ` to run at ${when(opts.at)}`
                : '';
          write(
            r.status === 'duplicate'
              ? `${r.id} exists already: nothing was written`
              : `${r.status} ${r.id} in queue ${queue}${how}`,
          );
        });
      },
    );

  program
    .command('dashboard')
    .description('serve the web dashboard (Ctrl-C to stop)')
    .option('--port <n>', 'port to listen on (0: a free one)', wholeArg(0, 65_535), 3000)
    .option('--host <host>', 'interface to listen on; 127.0.0.1 keeps it on this machine', '127.0.0.1')
    .option('--base-path <path>', "serve under this path, e.g. '/admin/queues'")
    .option('--read-only', 'no action buttons; every POST answers 403')
    .option('--no-metrics', 'do not serve Prometheus metrics at <base-path>/metrics')
    .option('--basic-auth <user:password>', 'require HTTP basic auth (default: $ECHOMQ_BASIC_AUTH)')
    .option('--bearer <token>', 'require this bearer token (default: $ECHOMQ_BEARER)')
    .action(
      async (
        opts: {
          port: number;
          host: string;
          basePath?: string;
          readOnly?: boolean;
          metrics: boolean;
          basicAuth?: string;
          bearer?: string;
        },
        cmd: Command,
      ) => {
        const g = globals(cmd);
        let mod: { startDashboard?: (o: Record<string, unknown>) => Promise<unknown> };
        try {
          // A variable specifier: the dashboard is optional, so this file compiles without it.
          const spec = './dashboard.js';
          mod = (await import(spec)) as typeof mod;
        } catch (err) {
          if (
            (err as { code?: string }).code === 'ERR_MODULE_NOT_FOUND' &&
            /dashboard/.test((err as Error).message)
          ) {
            throw new CliError(
              EXIT.usage,
              'the dashboard is not part of this build (no dashboard module next to cli.js); install a version of echomq that ships it',
            );
          }
          throw err;
        }
        if (typeof mod.startDashboard !== 'function') {
          throw new CliError(EXIT.usage, 'the dashboard module does not export startDashboard()');
        }
        const auth: { basic?: { user: string; password: string }; bearer?: string } = {};
        const basic = opts.basicAuth ?? process.env.ECHOMQ_BASIC_AUTH;
        if (basic !== undefined) {
          const colon = basic.indexOf(':');
          if (colon <= 0) throw new CliError(EXIT.usage, '--basic-auth takes user:password');
          auth.basic = { user: basic.slice(0, colon), password: basic.slice(colon + 1) };
        }
        const bearer = opts.bearer ?? process.env.ECHOMQ_BEARER;
        if (bearer) auth.bearer = bearer;
        const guarded = auth.basic !== undefined || auth.bearer !== undefined;
        await withSession(g, async (s) => {
          const handle = (await mod.startDashboard!({
            port: opts.port,
            host: opts.host,
            url: s.url,
            mq: s.mq,
            readOnly: opts.readOnly === true,
            metrics: opts.metrics,
            ...(opts.basePath === undefined ? {} : { basePath: opts.basePath }),
            ...(guarded ? { auth } : {}),
          })) as { url?: string; close?: () => Promise<void> } | undefined;
          const at = handle?.url ?? `http://${opts.host}:${opts.port}/`;
          if (g.json) printJson({ url: at });
          else write(`dashboard on ${at} (Redis ${shown(s.url)}) — Ctrl-C to stop`);
          if (!guarded && !['127.0.0.1', 'localhost', '::1'].includes(opts.host)) {
            process.stderr.write(
              `warning: the dashboard on ${opts.host} has no auth and can retry, cancel and remove jobs; pass --basic-auth, --bearer or --read-only\n`,
            );
          }
          await new Promise<void>((done) => {
            const stop = () => {
              Promise.resolve(handle?.close?.()).finally(done);
            };
            process.once('SIGINT', stop);
            process.once('SIGTERM', stop);
          });
        });
      },
    );

  program
    .command('bench')
    .description('run the benchmark suite (in a source checkout): arguments pass through to bench/run.ts')
    .argument('[args...]')
    .allowUnknownOption()
    .helpOption(false)
    .action(async (args: string[]) => {
      if (!existsSync(join(ROOT, 'bench', 'run.ts'))) {
        throw new CliError(
          EXIT.usage,
          `no bench/ next to ${ROOT}: the benchmarks live in the source repository (git clone, npm install, then echomq bench)`,
        );
      }
      const code = await new Promise<number>((done, fail) => {
        const child = spawn('npm', ['run', 'bench', '--', ...args], {
          cwd: ROOT,
          stdio: 'inherit',
          shell: process.platform === 'win32',
        });
        child.on('error', fail);
        child.on('exit', (c, signal) => done(c ?? (signal ? 1 : 0)));
      });
      if (code !== 0) throw new CliError(code, `bench exited with code ${code}`);
    });

  return program;
}

/** The exit code an error maps to. */
function exitCodeOf(err: unknown): number {
  if (err instanceof CliError) return err.exitCode;
  if (err instanceof EchoMQError) return err.code === 'EMQNOJOB' ? EXIT.notFound : EXIT.usage;
  if (isConnectionError(err)) return EXIT.noServer;
  return EXIT.usage;
}

function messageOf(err: unknown): string {
  if (err instanceof EchoMQError && err.code === 'EMQSTATE') return err.message.replace(/^EMQSTATE: /, '');
  if (err instanceof EchoMQError && err.code === 'EMQNOJOB') return err.message.replace(/^EMQNOJOB: /, '');
  if (isConnectionError(err)) {
    return `lost the connection to Redis (${(err as Error).message}) — check the server is up, or pass --url`;
  }
  return err instanceof Error ? err.message : String(err);
}

/** Runs the CLI over `argv` (as process.argv: node, script, ...) and resolves with the exit code. */
export async function main(argv: string[] = process.argv): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return EXIT.ok;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.ok : EXIT.usage; // commander printed it
    process.stderr.write(`echomq: ${messageOf(err)}\n`);
    return exitCodeOf(err);
  }
}

function isEntryPoint(): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return realpathSync(resolve(entry)) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return pathToFileURL(resolve(entry)).href === import.meta.url;
  }
}

if (isEntryPoint()) {
  process.exitCode = await main();
}
