// The commands that change something, each through the Queue's verbs (one verb, or a verb in
// batches with a progress bar): enqueue, retry, promote, reschedule, cancel, remove, pause,
// resume, drain, obliterate (both asking first), clean.
import { type Command, Option } from 'commander';
import { formatDuration } from '../core/duration.js';
import type { EnqueueOptions } from '../core/types.js';
import { durationArg, instantArg, wholeArg } from './args.js';
import { printJson, progress, when, write } from './render.js';
import {
  CliError,
  confirm,
  EXIT,
  globals,
  jobCommand,
  noJob,
  requireJobId,
  requireQueue,
  withSession,
} from './session.js';

/** Jobs recovered per reap call by `echomq recover`. */
const RECOVER_BATCH = 1000;

export function registerWrites(program: Command): void {
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
        cmd: Command,
      ) => {
        const g = globals(cmd);
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
    program,
    'promote',
    'run a scheduled job now, ahead of its run-at',
    async (s, queue, id) => {
      await s.mq.queue(queue).promote(id);
      return { id, status: 'promoted' };
    },
    ({ id }) => `promoted ${id}: it is pending now`,
  );

  jobCommand<{ id: string; runAt: number }, { in?: number; at?: number }>(
    program,
    'reschedule',
    'move a job that has not started to a new run-at (--in or --at, on the server clock)',
    async (s, queue, id, opts) => {
      if ((opts.in === undefined) === (opts.at === undefined)) {
        throw new CliError(EXIT.usage, 'give --in or --at (one of them)');
      }
      const q = s.mq.queue(queue);
      const runAt = await q.reschedule(id, opts.in !== undefined ? { in: opts.in } : { at: opts.at! });
      return { id, runAt };
    },
    ({ id, runAt }) => `rescheduled ${id} to run at ${when(runAt)}`,
    (c) =>
      c
        .option('--in <duration>', 'run after this long (500ms, 5s, 10m, 1h), from now', durationArg)
        .option('--at <when>', 'run at this instant: epoch ms or an ISO date', instantArg),
  );

  jobCommand(
    program,
    'cancel',
    'cancel a waiting job, or ask a running one to stop',
    async (s, queue, id) => ({ id, status: await s.mq.queue(queue).cancel(id) }),
    ({ id, status }) =>
      status === 'cancelled'
        ? `cancelled ${id}`
        : `asked ${id} to stop: it is running; its handler's ctx.signal aborts at the next lease extension or ctx.checkpoint(), and the job ends cancelled if the handler then stops (throws) — a handler that ignores the signal completes it`,
  );

  program
    .command('recover')
    .description('return active jobs whose lease expired (their worker died) to pending, as a consumer would')
    .argument('<queue>')
    .action(async (queue: string, _opts, cmd: Command) => {
      const g = globals(cmd);
      await withSession(g, async (s) => {
        await requireQueue(s, queue);
        const q = s.mq.queue(queue);
        const ids: string[] = [];
        // The consumers' own sweep (reap), in batches until a batch comes back short.
        for (let batch = await q.reap(RECOVER_BATCH); ; batch = await q.reap(RECOVER_BATCH)) {
          ids.push(...batch);
          if (batch.length < RECOVER_BATCH) break;
        }
        if (g.json) return printJson({ recovered: ids.length, ids });
        write(
          ids.length === 0
            ? `no expired leases in queue ${queue}: nothing to recover`
            : `recovered ${ids.length} job(s) whose lease had expired: pending again (an attempt counted) — ${ids.slice(0, 10).join(', ')}${ids.length > 10 ? ', …' : ''}`,
        );
      });
    });

  program
    .command('migrate')
    .description(
      'step a queue up to the next protocol version once every live consumer speaks it (docs/reference/upgrading.md)',
    )
    .argument('<queue>')
    .option('--to <version>', 'the version to reach (default: the highest this release speaks)', wholeArg(1))
    .option('--window <ms>', 'a consumer that beat within this many ms counts as alive', wholeArg(0), 60_000)
    .option('--check', 'only say what is stored and which alive consumers speak what; change nothing')
    .action(async (queue: string, opts: { to?: number; window: number; check?: boolean }, cmd: Command) => {
      const g = globals(cmd);
      await withSession(g, async (s) => {
        await requireQueue(s, queue);
        const q = s.mq.queue(queue);
        if (opts.check) {
          const version = await q.protocolVersion();
          const alive = (await s.inspector.consumers(queue)).filter(
            (c) => c.silentMs <= Math.max(opts.window, 3 * c.beatMs),
          );
          const next = version + 1;
          const holding = alive.filter((c) => !c.protocols.includes(next));
          if (g.json)
            return printJson({
              queue,
              version,
              alive: alive.map(({ id, host, pid, protocols, silentMs }) => ({
                id,
                host,
                pid,
                protocols,
                silentMs,
              })),
            });
          write(`queue ${queue}: protocol ${version}; ${alive.length} consumer(s) alive`);
          for (const c of alive)
            write(
              `  ${c.id} (${c.host} pid ${c.pid}) speaks ${c.protocols.join(',')}, beat ${c.silentMs} ms ago`,
            );
          write(
            holding.length === 0
              ? `every alive consumer speaks ${next}: echomq migrate ${queue} would step it up`
              : `${holding.length} alive consumer(s) speak no ${next}: upgrade or stop them first`,
          );
          return;
        }
        const r = await q.migrate({
          windowMs: opts.window,
          ...(opts.to === undefined ? {} : { to: opts.to }),
        });
        if (g.json) return printJson({ queue, ...r });
        write(
          r.version === r.from
            ? `queue ${queue} is at protocol ${r.version} already: nothing to do`
            : `queue ${queue}: protocol ${r.from} -> ${r.version} (${r.consumers} alive consumer(s), each speaks ${r.version})`,
        );
      });
    });

  jobCommand(
    program,
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
    .command('drain')
    .description('delete every waiting job of a queue (and scheduled ones with --scheduled)')
    .argument('<queue>')
    .option('--scheduled', 'also delete scheduled jobs (delayed, retries in backoff)')
    .option('--batch <n>', 'jobs per script call', wholeArg(1, 100_000), 1000)
    .option('-y, --yes', 'do not ask for confirmation')
    .action(
      async (queue: string, opts: { scheduled?: boolean; batch: number; yes?: boolean }, cmd: Command) => {
        const g = globals(cmd);
        await withSession(g, async (s) => {
          await requireQueue(s, queue);
          const q = s.mq.queue(queue);
          const counts = await q.counts();
          const total = counts.pending + (opts.scheduled ? counts.scheduled : 0);
          const what = opts.scheduled ? 'waiting and scheduled' : 'waiting';
          await confirm(`Delete the ${total} ${what} jobs of queue ${queue}?`, opts.yes);
          const bar = progress(`draining ${queue}`);
          const deleted = await q.drain({
            scheduled: opts.scheduled === true,
            batch: opts.batch,
            onProgress: (p) => bar.update(p.deleted, Math.max(total, p.deleted)),
          });
          bar.end();
          if (g.json) return printJson({ queue, deleted });
          write(`deleted ${deleted} ${what} jobs of queue ${queue}`);
        });
      },
    );

  program
    .command('obliterate')
    .description('delete every key of a queue: jobs, logs, lanes, schedulers, events, settings')
    .argument('<queue>')
    .option('--force', 'go on while jobs are active')
    .option('--batch <n>', 'keys looked at per script call', wholeArg(1, 100_000), 1000)
    .option('-y, --yes', 'do not ask for confirmation')
    .action(async (queue: string, opts: { force?: boolean; batch: number; yes?: boolean }, cmd: Command) => {
      const g = globals(cmd);
      await withSession(g, async (s) => {
        await requireQueue(s, queue);
        await confirm(`Delete queue ${queue} and everything in it, for good?`, opts.yes);
        const bar = progress(`obliterating ${queue}`);
        const deleted = await s.mq.queue(queue).obliterate({
          force: opts.force === true,
          batch: opts.batch,
          onProgress: (p) => bar.update(p.deleted, p.total),
        });
        bar.end();
        if (g.json) return printJson({ queue, deleted });
        write(`obliterated queue ${queue}: ${deleted} keys deleted`);
      });
    });

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
}
