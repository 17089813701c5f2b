// The commands that only read: queues, stats, jobs, job, schedulers, tail. They go through the
// Inspector (tail through an events reader) and never call a verb.

import { type Command, Option } from 'commander';
import { JOB_STATES, type JobState } from '../core/types.js';
import type { LogPage } from '../jobs/logs.js';
import type { FlowTree } from '../wire/flow-reads.js';
import { fromArg, stateArg, wholeArg } from './args.js';
import {
  eventJson,
  eventLine,
  jobDetail,
  jobsTable,
  printJson,
  queuesTable,
  schedulersText,
  statsText,
  write,
} from './render.js';
import {
  CliError,
  EXIT,
  globals,
  jobCommand,
  noJob,
  queueView,
  report,
  requireQueue,
  shown,
  withSession,
} from './session.js';

export function registerReads(program: Command): void {
  program
    .command('queues')
    .description('list the queues with their job counts')
    .action(async (_opts, cmd: Command) => {
      await report(
        globals(cmd),
        undefined,
        (s) => s.inspector.queues(),
        (queues, s) =>
          queues.length === 0
            ? `no queues on ${shown(s.url)} yet — enqueue a job to make one`
            : queuesTable(queues),
      );
    });

  program
    .command('stats')
    .description('counts per state and lane, the oldest wait, rates of the last hour, consumers')
    .argument('<queue>')
    .option('--watch [seconds]', 'redraw every few seconds (default 2) until Ctrl-C', wholeArg(1, 3600))
    .action(async (queue: string, opts: { watch?: number | true }, cmd: Command) => {
      const g = globals(cmd);
      if (opts.watch === undefined) {
        return report(g, queue, (s) => s.inspector.stats(queue), statsText);
      }
      const every = (opts.watch === true ? 2 : opts.watch) * 1000;
      await withSession(g, async (s) => {
        await requireQueue(s, queue);
        let stop = false;
        let wake: () => void = () => {};
        const end = () => {
          stop = true;
          wake();
        };
        process.once('SIGINT', end);
        process.once('SIGTERM', end);
        try {
          while (!stop) {
            const st = await s.inspector.stats(queue);
            if (g.json) write(JSON.stringify(st));
            else {
              // On a terminal, redraw in place; piped, one snapshot after another.
              if (process.stdout.isTTY) process.stdout.write('\u001b[H\u001b[2J');
              write(`${statsText(st)}\n\n(every ${every / 1000}s — Ctrl-C to stop)`);
            }
            await new Promise<void>((r) => {
              wake = r;
              setTimeout(r, every).unref();
            });
          }
        } finally {
          process.off('SIGINT', end);
          process.off('SIGTERM', end);
        }
      });
    });

  program
    .command('jobs')
    .description('a page of jobs in one state (newest first for completed, dead, cancelled)')
    .argument('<queue>')
    .addOption(
      new Option(
        '--state <state>',
        `the state to list: ${JOB_STATES.join(', ')} (BullMQ's failed, delayed, waiting too)`,
      )
        .argParser(stateArg)
        .default('pending'),
    )
    .option('--limit <n>', 'jobs per page (1-1000)', wholeArg(1, 1000), 20)
    .option('--offset <n>', 'jobs to skip', wholeArg(0), 0)
    .option('--group <group>', 'with --state pending: only this lane')
    .option('--tag <tag>', 'only jobs with this tag')
    .option('--lane <lane>', 'the same as --group')
    .option('--name <name>', 'only jobs of this name')
    .option('--grep <text>', 'only jobs whose data or error contains this text (case-insensitive)')
    .option(
      '--error <text>',
      "only jobs whose error contains this text (case-sensitive, as retryAll's error)",
    )
    .option(
      '--scan <n>',
      'with --name, --grep or --error: jobs read at most (1-100000)',
      wholeArg(1, 100_000),
      10_000,
    )
    .action(async (queue: string, opts: JobsOptions & { lane?: string }, cmd: Command) => {
      const g = globals(cmd);
      opts.group ??= opts.lane;
      if (opts.group !== undefined && opts.state !== 'pending') {
        throw new CliError(EXIT.usage, '--group applies to --state pending only (a lane holds waiting jobs)');
      }
      if (opts.name !== undefined || opts.grep !== undefined || opts.error !== undefined) {
        return findJobs(g, queue, opts);
      }
      await withSession(g, async (s) => {
        await requireQueue(s, queue);
        const page = await s.inspector.jobs(queue, opts.state, {
          offset: opts.offset,
          limit: opts.limit,
          ...(opts.group === undefined ? {} : { group: opts.group }),
          ...(opts.tag === undefined ? {} : { tag: opts.tag }),
        });
        if (g.json) return printJson({ ...page, offset: opts.offset, limit: opts.limit });
        const where = `${opts.state}${opts.group ? ` in lane ${opts.group}` : ''}${opts.tag ? ` tagged ${opts.tag}` : ''}`;
        if (page.jobs.length === 0) {
          return write(
            `no ${where} jobs in queue ${queue}${page.total > 0 ? ` past offset ${opts.offset}` : ''}`,
          );
        }
        const last = opts.offset + page.jobs.length;
        write(
          `${where}: ${opts.offset + 1}-${last} of ${page.total}${page.partial ? ' (of the first 10000 read)' : ''}`,
        );
        write(jobsTable(opts.state, page.jobs));
        if (last < page.total) write(`next page: --offset ${last}`);
      });
    });

  jobCommand(
    program,
    'job',
    'one job: its row and its events still in the stream',
    async (s, queue, id) => (await s.inspector.job(queue, id)) ?? noJob(queue, id),
    jobDetail,
  );

  jobCommand<LogPage & { id: string; from: number }, { from: number; count: number }>(
    program,
    'logs',
    "a job's log lines (ctx.log), oldest first",
    async (s, queue, id, opts) => {
      const q = s.mq.queue(queue);
      if (!(await q.get(id))) noJob(queue, id);
      return { id, from: opts.from, ...(await q.logs(id, { from: opts.from, count: opts.count })) };
    },
    (page) =>
      page.count === 0
        ? `job ${page.id} has no log lines`
        : [
            `${page.id}: lines ${page.from + 1}-${page.from + page.logs.length} of ${page.count}`,
            ...page.logs,
          ].join('\n'),
    (c) =>
      c
        .option('--from <n>', 'the first line, from 0 (the oldest kept)', wholeArg(0), 0)
        .option('--count <n>', 'how many lines', wholeArg(1, 100_000), 100),
  );

  jobCommand(
    program,
    'flow',
    'the flow under a job: every job of it with its queue and state, as a tree',
    async (s, queue, id) => (await s.mq.queue(queue).flow(id)) ?? noJob(queue, id),
    (tree) => flowText(tree, tree.queue),
  );

  queueView(
    program,
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
    .option('--count <n>', 'exit after this many (shown) events', wholeArg(1))
    .option('--event <names>', 'only these events, comma-separated (e.g. failed,retries_exhausted)')
    .option('--name <name>', 'only events of jobs of this name')
    .action(
      async (
        queue: string,
        opts: { from: string; count?: number; event?: string; name?: string },
        cmd: Command,
      ) => {
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
            const wanted =
              opts.event === undefined ? undefined : new Set(opts.event.split(',').map((e) => e.trim()));
            const names = new Map<string, string | undefined>(); // job id -> name, read once per job
            const nameOf = async (id: string) => {
              if (!names.has(id)) {
                if (names.size > 10_000) names.clear();
                names.set(id, (await s.mq.queue(queue).get(id))?.name);
              }
              return names.get(id);
            };
            for (let r = await it.next(); !r.done; r = await it.next()) {
              if (wanted && !wanted.has(r.value.event)) continue;
              if (opts.name !== undefined && (!r.value.id || (await nameOf(r.value.id)) !== opts.name))
                continue;
              write(g.json ? eventJson(r.value) : eventLine(r.value));
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
      },
    );
}

/** `echomq jobs`'s options, as commander hands them over (--lane already folded into group). */
interface JobsOptions {
  state: JobState;
  limit: number;
  offset: number;
  group?: string;
  tag?: string;
  name?: string;
  grep?: string;
  error?: string;
  scan: number;
}

/**
 * `jobs --name/--grep/--error` (with --tag and --lane too): reads the state's jobs page by page (at most `scan` of them) and keeps
 * the matching ones, up to `limit`; says how many it read, so a bounded search is never
 * mistaken for "there are none".
 */
async function findJobs(g: ReturnType<typeof globals>, queue: string, opts: JobsOptions): Promise<void> {
  await withSession(g, async (s) => {
    await requireQueue(s, queue);
    const found = await s.inspector.find(queue, opts.state, {
      name: opts.name,
      grep: opts.grep,
      tag: opts.tag,
      error: opts.error,
      group: opts.group,
      limit: opts.limit,
      scan: opts.scan,
    });
    if (g.json) return printJson(found);
    const what = [
      opts.name && `name ${opts.name}`,
      opts.tag && `tag ${opts.tag}`,
      opts.error && `error containing ${JSON.stringify(opts.error)}`,
      opts.grep && `containing ${JSON.stringify(opts.grep)}`,
    ]
      .filter(Boolean)
      .join(', ');
    write(
      `${opts.state}${opts.group ? ` in lane ${opts.group}` : ''} jobs with ${what}: ${found.jobs.length} found in ${found.scanned} read of ${found.total}${found.scanned < found.total ? ` (--scan ${opts.scan} reached: raise it to read further)` : ''}`,
    );
    if (found.jobs.length > 0) write(jobsTable(opts.state, found.jobs));
  });
}

/** One line per job, indented by depth: id, state, name, and the queue when not the root's. */
function flowText(node: FlowTree, root: string, depth = 0): string {
  const label = [node.id, node.state, node.name, node.queue === root ? undefined : `in ${node.queue}`];
  const line = `${'  '.repeat(depth)}${depth > 0 ? '└ ' : ''}${label.filter(Boolean).join('  ')}`;
  return [line, ...node.children.map((c) => flowText(c, root, depth + 1))].join('\n');
}
