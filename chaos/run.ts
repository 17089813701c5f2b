// `npm run chaos -- [--seed N] [--duration S] [--jobs N] [--workers N] [--profile always|everysec|both]
//                    [--lease MS] [--keep] [--server-faults on|off|only]`
// Runs the chaos suite (chaos/harness.ts) once per AOF profile, prints a table of the figures and
// one JSON line, and exits non-zero when an invariant failed (with appendfsync always, a lost
// acknowledged job is such a failure). See chaos/README.md.
import { formatTable, type Profile, type ProfileReport, runProfile } from './harness.js';
import { formatServerFaults, runServerFaults, serverFaultFailures } from './server-faults.js';

const USAGE =
  'usage: tsx chaos/run.ts [--seed N] [--duration S] [--jobs N] [--workers N] ' +
  '[--profile always|everysec|both] [--lease MS] [--keep] [--server-faults on|off|only]';

function parse(argv: string[]) {
  const o = {
    seed: Math.floor(Math.random() * 2 ** 31),
    duration: 60,
    jobs: 3000,
    workers: 3,
    profile: 'both',
    lease: 2000,
    keep: false,
    serverFaults: 'on',
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    if (flag === '--keep') {
      o.keep = true;
      continue;
    }
    if (flag === '--help' || flag === '-h') {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    }
    const value = argv[++i];
    const n = Number(value);
    const whole = value !== undefined && Number.isInteger(n) && n >= 0;
    if (flag === '--profile' && (value === 'always' || value === 'everysec' || value === 'both'))
      o.profile = value;
    else if (flag === '--seed' && whole) o.seed = n;
    else if (flag === '--duration' && whole && n >= 5) o.duration = n;
    else if (flag === '--jobs' && whole && n >= 1) o.jobs = n;
    else if (flag === '--workers' && whole && n >= 1) o.workers = n;
    else if (flag === '--lease' && whole && n >= 200) o.lease = n;
    else if (flag === '--server-faults' && (value === 'on' || value === 'off' || value === 'only'))
      o.serverFaults = value;
    else {
      process.stderr.write(`bad option ${flag} ${value ?? ''}\n${USAGE}\n`);
      process.exit(2);
    }
  }
  return o;
}

const o = parse(process.argv.slice(2));
const profiles: Profile[] = o.profile === 'both' ? ['always', 'everysec'] : [o.profile as Profile];
process.stderr.write(
  `chaos: seed ${o.seed}, ${o.duration} s, ${o.jobs} jobs, ${o.workers} consumers, ` +
    `profile ${profiles.join(' + ')} (replay with --seed ${o.seed})\n`,
);
const reports: ProfileReport[] = [];
for (const profile of o.serverFaults === 'only' ? [] : profiles) {
  reports.push(
    await runProfile({
      seed: o.seed,
      durationS: o.duration,
      jobs: o.jobs,
      workers: o.workers,
      profile,
      leaseMs: o.lease,
      keep: o.keep,
      log: (line) => process.stderr.write(`${line}\n`),
    }),
  );
}
// The server's own faults (chaos/server-faults.ts): failover with lag, clock steps, a pause.
const serverRows =
  o.serverFaults === 'off' ? [] : await runServerFaults((line) => process.stderr.write(`${line}\n`));
const serverFailures = serverFaultFailures(serverRows);
const ok = reports.every((r) => r.failures.length === 0) && serverFailures.length === 0;
if (reports.length > 0) process.stdout.write(`${formatTable(reports)}\n`);
if (serverRows.length > 0) process.stdout.write(`\n${formatServerFaults(serverRows)}\n`);
for (const f of serverFailures) process.stdout.write(`FAILED ${f}\n`);
process.stdout.write(
  `${JSON.stringify({ seed: o.seed, durationS: o.duration, jobs: o.jobs, workers: o.workers, ok, profiles: reports, serverFaults: serverRows })}\n`,
);
process.exit(ok ? 0 : 1);
