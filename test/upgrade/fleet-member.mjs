// One process of a mixed fleet (test/upgrade/mixed-fleet.test.ts): a producer, a consumer or
// both, of whichever release `entry` is (today's src/index.ts under tsx, or an earlier commit's
// dist/index.js). Plain JavaScript that only calls the API both releases have, so the same
// file drives either.
//
// Usage: node [--import tsx] fleet-member.mjs <entry> <redis-url> <queue> <name> [<protocolVersion>]
// (today's members pass 1: a fleet that holds a release speaking 1 only stamps new queues 1;
// an earlier release, which has no such option, is started without it).
// It reads one command per line on stdin and answers on stdout:
//   consume <concurrency> <leaseMs> <beatMs>  start consuming; then, per run of a job:
//                                             `start <id> <attempt>`, `end <id> <attempt>`,
//                                             and `completed <id>` / `lost <id>` as the consumer says
//   add <tag> <json spec>                     enqueue spec.count jobs: `added <tag> <id>,<id>,...`
//   lane <group> <concurrency>                configure one lane: `ok lane`
//   scheduler <id> <everyMs>                  upsert an every-ms scheduler: `ok scheduler`
//   get <id>                                  the job as this release reads it: `view <json>`
//   close                                     close gracefully: `closed`, then exit 0
// A command that fails answers `error <code> <message>`. Handlers hold each job for its
// `holdMs`, throw while `attempt <= fails`, and return who ran which attempt.
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';

const [entry, url, queueName, name, protocolVersion] = process.argv.slice(2);
if (!entry || !url || !queueName || !name) {
  process.stderr.write('usage: fleet-member.mjs <entry> <redis-url> <queue> <name> [<protocolVersion>]\n');
  process.exit(2);
}

const { EchoMQ } = await import(pathToFileURL(entry).href);
const say = (line) => process.stdout.write(`${line}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

let mq;
let q;
let consumer;

async function queue() {
  if (!q) {
    mq = await EchoMQ.connect(protocolVersion ? { url, protocolVersion: Number(protocolVersion) } : { url });
    q = mq.queue(queueName);
  }
  return q;
}

async function handle(job) {
  say(`start ${job.id} ${job.attempts}`);
  await sleep(job.data.holdMs ?? 0);
  say(`end ${job.id} ${job.attempts}`);
  if (job.attempts <= (job.data.fails ?? 0)) throw new Error(`attempt ${job.attempts} fails on purpose`);
  return { by: name, attempt: job.attempts };
}

/** Enqueues spec.count jobs: delayed by spec.delayMs + i * spec.spreadMs when delayMs is set. */
async function add(spec) {
  const jobs = await queue();
  const ids = [];
  for (let i = 0; i < spec.count; i++) {
    const data = { holdMs: spec.holdMs ?? 0, fails: spec.fails ?? 0, from: name };
    const opts = {};
    if (spec.attempts !== undefined) opts.attempts = spec.attempts;
    if (spec.group !== undefined) opts.group = spec.group;
    if (spec.backoffMs !== undefined) opts.backoff = { kind: 'fixed', ms: spec.backoffMs };
    const made =
      spec.delayMs === undefined
        ? await jobs.enqueue(data, opts)
        : await jobs.enqueueIn(data, spec.delayMs + i * (spec.spreadMs ?? 0), opts);
    ids.push(made.id);
  }
  return ids;
}

async function run(line) {
  const [verb, ...args] = line.trim().split(' ');
  switch (verb) {
    case 'consume': {
      const [concurrency, leaseMs, beatMs] = args.map(Number);
      consumer = (await queue()).consume(handle, { concurrency, leaseMs, beatMs });
      consumer.on('completed', (job) => say(`completed ${job.id}`));
      consumer.on('lost', (job) => say(`lost ${job.id}`));
      consumer.on('error', () => {}); // a refused acknowledgement is the point of some runs
      return 'ok consume';
    }
    case 'add':
      return `added ${args[0]} ${(await add(JSON.parse(args.slice(1).join(' ')))).join(',')}`;
    case 'lane':
      await (await queue()).lanes.configure(args[0], { concurrency: Number(args[1]) });
      return 'ok lane';
    case 'scheduler':
      await (await queue()).schedulers.upsert(args[0], { every: Number(args[1]) }, { data: { holdMs: 0 } });
      return 'ok scheduler';
    case 'get':
      return `view ${JSON.stringify(await (await queue()).get(args[0]))}`;
    case 'close':
      await consumer?.close();
      await mq?.close();
      say('closed');
      return process.exit(0);
    default:
      throw Object.assign(new Error(`unknown command ${JSON.stringify(line)}`), { code: 'USAGE' });
  }
}

// Commands run one at a time, in the order they came.
let chain = Promise.resolve();
createInterface({ input: process.stdin }).on('line', (line) => {
  chain = chain.then(() =>
    run(line).then(say, (err) =>
      say(`error ${err?.code ?? 'ERR'} ${String(err?.message ?? err).split('\n')[0]}`),
    ),
  );
});
say('ready');
