// The commands that run something long: `dashboard` serves the web dashboard on this session's
// connection until Ctrl-C; `bench` runs the benchmark suite of a source checkout.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { type AuthNames, checkAuth, type DashboardAuth } from '../dashboard/guard.js';
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
  /** false with --no-auth: serve without credentials, said on purpose. */
  auth: boolean;
}

const LOCAL_HOSTS = ['127.0.0.1', 'localhost', '::1'];

const NO_CREDENTIAL =
  'the dashboard needs a credential: --bearer <token> (or $ECHOMQ_BEARER), --basic-auth <user:password> ' +
  '(or $ECHOMQ_BASIC_AUTH), or --no-auth to serve without one on purpose';

/** How the dashboard's credential errors name this command's flags. */
const FLAG_NAMES: AuthNames = {
  bearer: '--bearer (or $ECHOMQ_BEARER)',
  user: 'the user of --basic-auth (or $ECHOMQ_BASIC_AUTH)',
  password: 'the password of --basic-auth (or $ECHOMQ_BASIC_AUTH)',
  how: NO_CREDENTIAL,
};

/**
 * The credentials of --basic-auth and --bearer, or of their environment variables when the flag
 * is not given (a variable that is set but empty is a credential, and refused as one); `false`
 * only for --no-auth. Nothing given at all is a usage error: no dashboard opens by omission.
 */
function authOf(flags: DashboardFlags): DashboardOptions['auth'] {
  const auth: DashboardAuth = {};
  const basic = flags.basicAuth ?? process.env.ECHOMQ_BASIC_AUTH;
  if (basic !== undefined) {
    const colon = basic.indexOf(':');
    if (colon <= 0)
      throw new CliError(EXIT.usage, '--basic-auth (or $ECHOMQ_BASIC_AUTH) takes user:password');
    auth.basic = { user: basic.slice(0, colon), password: basic.slice(colon + 1) };
  }
  const bearer = flags.bearer ?? process.env.ECHOMQ_BEARER;
  if (bearer !== undefined) auth.bearer = bearer;
  const given = auth.basic !== undefined || auth.bearer !== undefined;
  if (!flags.auth) {
    if (given)
      throw new CliError(EXIT.usage, '--no-auth cannot go with --bearer, --basic-auth or their variables');
    return false;
  }
  if (!given) throw new CliError(EXIT.usage, NO_CREDENTIAL);
  try {
    checkAuth(auth, FLAG_NAMES);
  } catch (err) {
    throw new CliError(EXIT.usage, (err as Error).message);
  }
  return auth;
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
    .option('--bearer <token>', 'require this bearer token, 16+ characters (default: $ECHOMQ_BEARER)')
    .option('--no-auth', 'serve without credentials: anyone who reaches the port can act on jobs')
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
          auth,
        });
        if (g.json) printJson({ url: dashboard.url });
        else write(`dashboard on ${dashboard.url} (Redis ${shown(s.url)}) — Ctrl-C to stop`);
        if (auth === false && !LOCAL_HOSTS.includes(flags.host)) {
          process.stderr.write(
            `warning: the dashboard on ${flags.host} has no auth and can retry, cancel and remove jobs; pass --basic-auth or --bearer instead of --no-auth, or add --read-only\n`,
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
