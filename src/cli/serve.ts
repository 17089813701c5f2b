// The commands that run something long: `dashboard` serves the web dashboard on this session's
// connection until Ctrl-C; `bench` runs the benchmark suite of a source checkout.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { type DashboardOptions, startDashboard } from '../dashboard/index.js';
import { wholeArg } from './args.js';
import { printJson, write } from './render.js';
import { type CliContext, CliError, EXIT, globals, shown, withSession } from './session.js';

interface DashboardFlags {
  port: number;
  host: string;
  basePath?: string;
  readOnly?: boolean;
  metrics: boolean;
  basicAuth?: string;
  bearer?: string;
}

const LOCAL_HOSTS = ['127.0.0.1', 'localhost', '::1'];

/** The credentials of --basic-auth and --bearer (or their environment variables); undefined: none. */
function authOf(flags: DashboardFlags): DashboardOptions['auth'] {
  const auth: NonNullable<DashboardOptions['auth']> = {};
  const basic = flags.basicAuth ?? process.env.ECHOMQ_BASIC_AUTH;
  if (basic !== undefined) {
    const colon = basic.indexOf(':');
    if (colon <= 0) throw new CliError(EXIT.usage, '--basic-auth takes user:password');
    auth.basic = { user: basic.slice(0, colon), password: basic.slice(colon + 1) };
  }
  const bearer = flags.bearer ?? process.env.ECHOMQ_BEARER;
  if (bearer) auth.bearer = bearer;
  return auth.basic !== undefined || auth.bearer !== undefined ? auth : undefined;
}

/** Resolves once SIGINT or SIGTERM arrives. */
function interrupted(): Promise<void> {
  return new Promise((done) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      done();
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
}

export function registerServe(program: Command, ctx: CliContext): void {
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
    .action(async (flags: DashboardFlags, cmd: Command) => {
      const g = globals(cmd);
      const auth = authOf(flags);
      await withSession(g, async (s) => {
        const dashboard = await startDashboard({
          port: flags.port,
          host: flags.host,
          url: s.url,
          mq: s.mq,
          readOnly: flags.readOnly === true,
          metrics: flags.metrics,
          ...(flags.basePath === undefined ? {} : { basePath: flags.basePath }),
          ...(auth === undefined ? {} : { auth }),
        });
        if (g.json) printJson({ url: dashboard.url });
        else write(`dashboard on ${dashboard.url} (Redis ${shown(s.url)}) — Ctrl-C to stop`);
        if (auth === undefined && !LOCAL_HOSTS.includes(flags.host)) {
          process.stderr.write(
            `warning: the dashboard on ${flags.host} has no auth and can retry, cancel and remove jobs; pass --basic-auth, --bearer or --read-only\n`,
          );
        }
        await interrupted();
        await dashboard.close();
      });
    });

  program
    .command('bench')
    .description('run the benchmark suite (in a source checkout): arguments pass through to bench/run.ts')
    .argument('[args...]')
    .allowUnknownOption()
    .helpOption(false)
    .action(async (args: string[]) => {
      if (!existsSync(join(ctx.root, 'bench', 'run.ts'))) {
        throw new CliError(
          EXIT.usage,
          `no bench/ next to ${ctx.root}: the benchmarks live in the source repository (git clone, npm install, then echomq bench)`,
        );
      }
      const code = await new Promise<number>((done, fail) => {
        const child = spawn('npm', ['run', 'bench', '--', ...args], {
          cwd: ctx.root,
          stdio: 'inherit',
          shell: process.platform === 'win32',
        });
        child.on('error', fail);
        child.on('exit', (c, signal) => done(c ?? (signal ? 1 : 0)));
      });
      if (code !== 0) throw new CliError(code, `bench exited with code ${code}`);
    });
}
