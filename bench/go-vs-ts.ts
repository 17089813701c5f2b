// Jobs/s of a Go consumer (runtimes/go, its emq-go binary) against a TypeScript consumer on
// the same redis-server: `npm run bench:go [-- --jobs 20000 --rounds 3 --concurrency 50]`.
// Each run gets a queue of its own: it is paused, filled with N no-op jobs, the consumer is
// started and left to park, then the queue is resumed and the time to N completions is taken
// (the queue's pending + active polled every 20 ms, since retention trims completed jobs). Go and TypeScript alternate, round by round; the medians are
// reported, as a line and as JSON. Needs Go (golang-go, golang-github-gomodule-redigo-dev).
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { EchoMQ } from '../src/queue/echomq.js';
import type { Queue } from '../src/queue/queue.js';
import { RedisServer } from '../test/support/redis-server.js';
import { ROOT } from '../test/support/run-process.js';
import { median } from './stats.js';

const args = process.argv.slice(2);
const flag = (name: string, fallback: number): number => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const JOBS = flag('jobs', 20_000);
const ROUNDS = flag('rounds', 3);
const CONCURRENCY = flag('concurrency', 50);
const GO_DIR = join(ROOT, 'runtimes', 'go');
const GO_ENV = { ...process.env, GOFLAGS: '-mod=vendor', GOPROXY: 'off' };

async function fill(q: Queue<{ n: number }>): Promise<void> {
  await q.pause();
  for (let i = 0; i < JOBS; i += 1000) {
    const items = [];
    for (let n = i; n < Math.min(JOBS, i + 1000); n++) items.push({ data: { n } });
    await q.enqueueMany(items);
  }
}

/** Resumes the queue and resolves with the seconds until every job completed. */
async function timeToDone(q: Queue<{ n: number }>): Promise<number> {
  const t0 = performance.now();
  await q.resume();
  for (;;) {
    // Completed jobs are trimmed by retention (1000 kept by default): count what is left to do.
    const c = await q.counts();
    if (c.pending + c.active === 0) return (performance.now() - t0) / 1000;
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'emq-go-bench-'));
  const bin = join(dir, 'emq-go');
  spawnSync('bash', [join(GO_DIR, 'vendor.sh')], { stdio: 'ignore' });
  const built = spawnSync('go', ['build', '-o', bin, './cmd/emq-go'], {
    cwd: GO_DIR,
    env: GO_ENV,
    encoding: 'utf8',
  });
  if (built.status !== 0) throw new Error(`go build failed (is Go installed?): ${built.stderr}`);
  const server = await RedisServer.start();
  const mq = await EchoMQ.connect({ url: server.url });
  const rates: Record<'go' | 'ts', number[]> = { go: [], ts: [] };
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const runtime of ['go', 'ts'] as const) {
        const name = `bench-${runtime}-${round}`;
        const q = mq.queue<{ n: number }>(name);
        await fill(q);
        let seconds: number;
        if (runtime === 'go') {
          const child = spawn(
            bin,
            [
              'consume',
              '--url',
              server.url,
              '--queue',
              name,
              '--concurrency',
              String(CONCURRENCY),
              '--quiet',
            ],
            { cwd: GO_DIR, env: GO_ENV, stdio: ['pipe', 'pipe', 'inherit'] },
          );
          await new Promise<void>((resolve) => {
            createInterface({ input: child.stdout! }).on('line', (l) => {
              if (JSON.parse(l).kind === 'ready') resolve();
            });
          });
          await new Promise((r) => setTimeout(r, 300)); // parked on the wake stream
          seconds = await timeToDone(q);
          child.stdin!.end();
          await new Promise((r) => child.on('close', r));
        } else {
          const c = q.consume(async (job) => ({ by: 'ts', n: job.data.n }), { concurrency: CONCURRENCY });
          await new Promise((r) => setTimeout(r, 300));
          seconds = await timeToDone(q);
          await c.close();
        }
        const rate = Math.round(JOBS / seconds);
        rates[runtime].push(rate);
        process.stderr.write(
          `round ${round + 1} ${runtime}: ${JOBS} jobs in ${seconds.toFixed(2)} s, ${rate} jobs/s\n`,
        );
      }
    }
  } finally {
    await mq.close();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const go = median(rates.go);
  const ts = median(rates.ts);
  console.log(
    `${JOBS} no-op jobs, concurrency ${CONCURRENCY}, median of ${ROUNDS}: Go ${go} jobs/s, TypeScript ${ts} jobs/s (Go/TS ${(go / ts).toFixed(2)})`,
  );
  console.log(
    JSON.stringify({ jobs: JOBS, concurrency: CONCURRENCY, rounds: ROUNDS, go: rates.go, ts: rates.ts }),
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
