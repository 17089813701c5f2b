// The commands that only read: queues, stats, jobs, job, schedulers, tail. They go through the
// Inspector (tail through an events reader) and never call a verb.
import { type Command, Option } from 'commander';
import type { LogPage } from '../logs.js';
import { JOB_STATES, type JobState } from '../queue.js';
import { fromArg, wholeArg } from './args.js';
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

  queueView(
    program,
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
    .option('--tag <tag>', 'only jobs with this tag')
    .action(
      async (
        queue: string,
        opts: { state: JobState; limit: number; offset: number; group?: string; tag?: string },
        cmd: Command,
      ) => {
        const g = globals(cmd);
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
      },
    );

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
    });
}
