// The ceiling: the same Redis running EchoMQ's own protocol scripts as fast as one pipelined
// client can drive them, with no library in between (argv built before the clock starts, no
// consumer bookkeeping). The library rows are compared with these to say how close EchoMQ
// gets to what Redis allows. Only the scripts' contracts are used: KEYS come from each
// script's `-- KEYS:` header, exactly as the runtime builds them.
import { EchoMQ, mintJobId } from '../src/index.js';
import { type Script, script } from '../src/wire/scripts.js';
import { payload, type RunContext, type Sizes } from './workloads.js';

export interface Ceiling {
  id: string;
  title: string;
  /** The library workload this bounds. */
  compare: string;
  n(sizes: Sizes): number;
  run(ctx: RunContext): Promise<number>;
}

const LEASE_MS = 30_000;
const MAX_ATTEMPTS = '3'; // what Queue.enqueue sends by default

type Driver = {
  mq: EchoMQ;
  prefix: string;
  keys(s: Script): string[];
  /** One EVALSHA per argv, in pipelines of `depth`, `lanes` pipelines in flight. */
  pipelined(s: Script, argvs: (string | number)[][], depth: number, lanes: number): Promise<void>;
  call(s: Script, argv: (string | number)[]): Promise<unknown>;
};

async function driver(ctx: RunContext, names: Parameters<typeof script>[0][]): Promise<Driver> {
  const mq = await EchoMQ.connect({ url: ctx.url });
  const q = mq.queue(ctx.queue);
  await q.promote(1); // runs `hello` once, as the library does before its first verb
  const client = mq.connector.client;
  for (const name of names) await client.script('LOAD', script(name).body);
  const keys = (s: Script) => s.keys.map((k) => q.keys.key(k));
  return {
    mq,
    prefix: q.keys.prefix,
    keys,
    async pipelined(s, argvs, depth, lanes) {
      const k = keys(s);
      let next = 0;
      const lane = async () => {
        while (next < argvs.length) {
          const start = next;
          next += depth;
          const p = client.pipeline();
          for (const argv of argvs.slice(start, start + depth)) p.evalsha(s.sha, k.length, ...k, ...argv);
          for (const [err] of (await p.exec()) ?? []) if (err) throw err;
        }
      };
      await Promise.all(Array.from({ length: lanes }, lane));
    },
    call: (s, argv) => client.evalsha(s.sha, s.keys.length, ...keys(s), ...argv),
  };
}

/** enqueue argv for `jobs` fresh jobs (1 or more per call). */
function enqueueArgv(prefix: string, jobs: number): string[] {
  const argv = [prefix];
  for (let i = 0; i < jobs; i++)
    argv.push(mintJobId(), JSON.stringify(payload({ i })), '0', '', '', MAX_ATTEMPTS, '');
  return argv;
}

const rate = (jobs: number, ms: number) => (jobs * 1000) / ms;

const enqueueOne: Ceiling = {
  id: 'ceiling-enqueue-1',
  title: 'enqueue script, 1 job per EVALSHA, pipelines of 1,000 calls, 2 in flight',
  compare: 'add-100-in-flight',
  n: (s) => s.ceiling,
  async run(ctx) {
    const d = await driver(ctx, ['enqueue']);
    try {
      const n = ctx.sizes.ceiling;
      const argvs = Array.from({ length: n }, () => enqueueArgv(d.prefix, 1));
      const { ms } = await ctx.timed(n, () => d.pipelined(script('enqueue'), argvs, 1000, 2));
      return rate(n, ms);
    } finally {
      await d.mq.close();
    }
  },
};

const enqueueThousand: Ceiling = {
  id: 'ceiling-enqueue-1000',
  title: 'enqueue script, 1,000 jobs per EVALSHA, 4 calls in flight',
  compare: 'bulk-add-1000',
  n: (s) => s.ceiling,
  async run(ctx) {
    const d = await driver(ctx, ['enqueue']);
    try {
      const n = Math.ceil(ctx.sizes.ceiling / 1000) * 1000;
      const argvs = Array.from({ length: n / 1000 }, () => enqueueArgv(d.prefix, 1000));
      const { ms } = await ctx.timed(n, () => d.pipelined(script('enqueue'), argvs, 1, 4));
      return rate(n, ms);
    } finally {
      await d.mq.close();
    }
  },
};

const CLAIM_BATCH = 100;
const CHAINS = 4;

const claimComplete: Ceiling = {
  id: 'ceiling-claim-complete',
  title: `claim ${CLAIM_BATCH}, then complete ${CLAIM_BATCH} + claim the next ${CLAIM_BATCH} per call, ${CHAINS} chains in flight`,
  compare: 'process-c100',
  n: (s) => s.ceiling,
  async run(ctx) {
    const d = await driver(ctx, ['enqueue', 'claim', 'complete']);
    try {
      const n = Math.ceil(ctx.sizes.ceiling / 1000) * 1000;
      const argvs = Array.from({ length: n / 1000 }, () => enqueueArgv(d.prefix, 1000));
      await d.pipelined(script('enqueue'), argvs, 1, 2);
      const claim = script('claim');
      const complete = script('complete');
      let completed = 0;
      const chain = async () => {
        let [jobs] = (await d.call(claim, [d.prefix, CLAIM_BATCH, LEASE_MS])) as [unknown[], string];
        while (jobs.length > 0) {
          const argv: (string | number)[] = [d.prefix, LEASE_MS, CLAIM_BATCH];
          for (let i = 0; i < jobs.length; i += 7) argv.push(jobs[i] as string, jobs[i + 1] as string, '');
          const [statuses, next] = (await d.call(complete, argv)) as [string[], unknown[], string];
          completed += statuses.filter((s) => s === 'OK').length;
          jobs = next;
        }
      };
      const { ms } = await ctx.timed(n, () => Promise.all(Array.from({ length: CHAINS }, chain)));
      if (completed !== n) throw new Error(`ceiling-claim-complete completed ${completed} of ${n}`);
      return rate(n, ms);
    } finally {
      await d.mq.close();
    }
  },
};

export const CEILINGS: Ceiling[] = [enqueueOne, enqueueThousand, claimComplete];
