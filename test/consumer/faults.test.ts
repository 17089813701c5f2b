// The consumer under connection faults: its connections killed server-side several times during
// a run, and the server itself restarted mid-run (AOF with fsync on every write, so what was
// acknowledged survives). No job may be lost; a handler may run twice (at-least-once).
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { Redis } from 'ioredis';
import { describe, expect } from 'vitest';
import { EchoMQ } from '../../src/queue/echomq.js';
import type { Queue } from '../../src/queue/queue.js';
import { library } from '../../src/wire/functions.js';
import { helperFixtures, queueTest, useRedisServer } from '../support/harness.js';
import { deferred, pause, within } from '../support/wait.js';

const env = useRedisServer({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });

const JOBS = 500;

/** Polls `read` every 5 ms until `done` holds; read errors (the server is restarting) count as not done. */
async function poll<T>(
  read: () => Promise<T>,
  done: (v: T) => boolean,
  what: string,
  ms: number,
): Promise<T> {
  const end = Date.now() + ms;
  let last: T | undefined;
  for (;;) {
    try {
      last = await read();
      if (done(last)) return last;
    } catch {
      // the server is down or the connection was just killed: try again
    }
    if (Date.now() > end)
      throw new Error(`timed out after ${ms} ms waiting for ${what} (last: ${String(last)})`);
    await pause(5);
  }
}

/**
 * A TCP proxy in front of the server that can lose one reply: the next command whose bytes
 * contain the armed marker runs on the server, and its connection is cut as the reply comes
 * back (the client sees a dropped connection after the command took effect).
 */
class ReplyDropper {
  private marker: string | undefined;
  private onDrop: (() => void) | undefined;
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(target: number): Promise<ReplyDropper> {
    let self: ReplyDropper | undefined;
    const server = createServer((client) => self?.pipe(client, target));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const addr = server.address();
    self = new ReplyDropper(server, typeof addr === 'object' && addr ? addr.port : 0);
    return self;
  }

  private pipe(client: Socket, target: number): void {
    const upstream = connect(target, '127.0.0.1');
    this.sockets.add(client).add(upstream);
    let dropNext = false;
    client.on('data', (d: Buffer) => {
      if (this.marker && d.includes(this.marker)) {
        this.marker = undefined;
        dropNext = true;
      }
      upstream.write(d);
    });
    upstream.on('data', (d: Buffer) => {
      if (!dropNext) {
        client.write(d);
        return;
      }
      client.destroy();
      upstream.destroy();
      this.onDrop?.();
    });
    for (const [a, b] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      a.on('error', () => b.destroy());
      a.on('close', () => {
        b.destroy();
        this.sockets.delete(a);
      });
    }
  }

  /** Loses the reply to the next command containing `marker`; resolves once it was dropped. */
  dropReplyTo(marker: string): Promise<void> {
    this.marker = marker;
    return new Promise((resolve) => {
      this.onDrop = resolve;
    });
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

/** A handler that counts its runs per job (a job may run twice: at-least-once) and returns its data. */
function work(ran: Map<string, number>) {
  return async (job: { id: string; data: number }): Promise<number> => {
    ran.set(job.id, (ran.get(job.id) ?? 0) + 1);
    await pause(1);
    return job.data;
  };
}

/** The file's helpers over one test's queue. */
function helpers({ q, raw }: { q: Queue<number, number>; raw: Redis }) {
  raw.on('error', () => {}); // this file restarts the server: reconnect errors are expected
  /** Every id's state, read straight from the rows. */
  async function states(ids: string[]): Promise<Map<string, string | null>> {
    const pipeline = raw.pipeline();
    for (const id of ids) pipeline.hget(`${q.keys.prefix}job:${id}`, 'state');
    const replies = (await pipeline.exec()) ?? [];
    return new Map(ids.map((id, i) => [id, replies[i]?.[1] as string | null]));
  }

  /** Waits until all `ids` are completed, then checks every row and that nothing is left over. */
  async function allCompleted(ids: string[]): Promise<void> {
    await poll(
      async () => (await q.counts()).completed,
      (n) => n === ids.length,
      `${ids.length} completed`,
      25_000,
    );
    const end = await states(ids);
    expect([...end.entries()].filter(([, s]) => s !== 'completed')).toEqual([]);
    expect(await q.counts()).toMatchObject({ pending: 0, active: 0, scheduled: 0, dead: 0 });
  }

  /** Waits (bounded) until handlers have started `n` distinct jobs. */
  async function started(ran: Map<string, number>, n: number): Promise<void> {
    await poll(
      async () => ran.size,
      (size) => size >= n,
      `${n} jobs started`,
      15_000,
    );
  }

  async function enqueueAll(): Promise<string[]> {
    const out = await q.enqueueMany(Array.from({ length: JOBS }, (_, i) => ({ data: i })));
    return out.map((r) => r.id);
  }
  return { states, allCompleted, started, enqueueAll };
}
type Helpers = ReturnType<typeof helpers>;

const it = queueTest<number, number>(env, 'faults')
  .extend<{ h: Helpers }>({ h: async ({ q, raw }, use) => use(helpers({ q, raw })) })
  .extend<Helpers>(helperFixtures<Helpers>(['states', 'allCompleted', 'started', 'enqueueAll']));

describe('connection faults', () => {
  it('loses no job when its connections are killed (CLIENT KILL TYPE normal) several times during a run', async ({
    q,
    raw,
    consumers,
    allCompleted,
    enqueueAll,
  }) => {
    const ran = new Map<string, number>();
    consumers.push(q.consume(work(ran), { concurrency: 10, leaseMs: 1000, beatMs: 100 }));
    const ids = await enqueueAll();
    let kills = 0;
    for (const at of [100, 200, 300, 400]) {
      await poll(
        async () => ran.size,
        (n) => n >= at,
        `${at} jobs started`,
        15_000,
      );
      kills += Number(await raw.client('KILL', 'TYPE', 'normal'));
    }
    expect(kills).toBeGreaterThanOrEqual(4); // each round killed at least the consumer's connections
    await allCompleted(ids);
    expect(ran.size).toBe(JOBS);
  });

  it('loses no job when the server restarts mid-run', async ({
    q,
    consumers,
    allCompleted,
    started,
    enqueueAll,
  }) => {
    const ran = new Map<string, number>();
    consumers.push(q.consume(work(ran), { concurrency: 10, leaseMs: 1000, beatMs: 100 }));
    const ids = await enqueueAll();
    await started(ran, 150);
    expect(ran.size).toBeLessThan(JOBS); // mid-run
    await env.server.restart();
    await allCompleted(ids);
    expect(ran.size).toBe(JOBS);
  });

  // With ioredis's defaults a command issued while the server is down waits in the offline queue
  // (up to 20 reconnect attempts, ~10 s) and one in flight is resent after the reconnect, so a
  // short restart never surfaces as an error and the consumer has nothing to report. Here the
  // consumer's connection gives up after one retry and the server stays down until the consumer
  // says it is degraded: then it comes back, and the consumer must recover and lose nothing.
  it('reports degraded while the server is down and recovered once it is back, losing no job', async ({
    q,
    consumers,
    others,
    allCompleted,
    started,
    enqueueAll,
  }) => {
    const fast = await EchoMQ.connect({ url: env.server.url, redisOptions: { maxRetriesPerRequest: 1 } });
    others.push(fast);
    const ran = new Map<string, number>();
    const log: string[] = [];
    const consumer = fast.queue<number, number>(q.name).consume(work(ran), {
      concurrency: 10,
      leaseMs: 1000,
      beatMs: 100,
    });
    consumers.push(consumer);
    const wentDown = new Promise<void>((resolve) => consumer.once('degraded', () => resolve()));
    const cameBack = new Promise<void>((resolve) => consumer.once('recovered', () => resolve()));
    consumer.on('degraded', (_err, retryInMs) => log.push(`degraded ${retryInMs > 0}`));
    consumer.on('recovered', () => log.push('recovered'));
    const ids = await enqueueAll();
    await started(ran, 150);
    expect(ran.size).toBeLessThan(JOBS); // mid-run
    await env.server.kill();
    await within(wentDown, 10_000, 'degraded while the server is down');
    await env.server.restart();
    await within(cameBack, 10_000, 'recovered after the restart');
    await allCompleted(ids);
    expect(ran.size).toBe(JOBS);
    expect(log[0]).toBe('degraded true');
    expect(log.at(-1)).toBe('recovered');
  });

  // A parked consumer blocks on the wake stream with XREAD BLOCK on a connection of its own. With
  // redisOptions.autoResendUnfulfilledCommands: false, ioredis never settles a command that was in
  // flight when its connection died, so only BlockingRead's watchdog (the block time, here under
  // the 200 ms beat, + WATCHDOG_GRACE_MS) ends such a read: it drops the connection and gives up on
  // the read, and the loop claims what came meanwhile. Without it the loop waited on the read
  // forever: nothing was claimed and close() never resolved.
  // The kill is aimed at that read while Redis has it blocked: the listing and the kill run in one
  // MULTI, so the test proves that order, not how soon a loaded machine gets there (it used to kill
  // every connection right after idle() and give the job 3.5 s, against ~2.2 s nominal). The main
  // connection is left up: a command in flight on it is the next describe's case.
  it('a parked consumer whose blocked read was dropped (no ioredis resend) still claims new work and closes', async ({
    q,
    raw,
  }) => {
    const own = await EchoMQ.connect({
      url: env.server.url,
      redisOptions: { autoResendUnfulfilledCommands: false, connectionName: 'parked' },
    });
    const c = own.queue<number, number>(q.name).consume(async (job) => job.data, { beatMs: 200 });
    try {
      await within(c.idle(), 10_000, 'idle');
      // A kill that lands between two reads (the read timed out) drops nothing: aim again.
      let killedBlocked = false;
      for (let kills = 0; !killedBlocked; kills++) {
        expect(kills, 'kills until one lands on the blocked read').toBeLessThan(20);
        const blocked = await poll(
          async () => blockedRead(String(await raw.client('LIST')), 'parked'),
          (line) => line !== undefined,
          'the consumer blocked on the wake stream',
          10_000,
        );
        const id = /^id=(\d+)/.exec(blocked!)![1]!;
        const replies = (await raw.multi().client('LIST', 'ID', id).client('KILL', 'ID', id).exec())!;
        expect(replies[1]).toEqual([null, 1]); // that connection, and only it, was killed
        killedBlocked = blockedRead(String(replies[0]![1]), 'parked') !== undefined;
      }
      const { id } = await q.enqueue(7);
      // Nominally the watchdog ends the read ~2.2 s after it began; the bound only tells a consumer
      // that recovered, however slowly, from one that never will.
      await poll(
        async () => (await q.get(id))?.state,
        (s) => s === 'completed',
        'the job to complete',
        15_000,
      );
      expect(await q.get(id)).toMatchObject({ state: 'completed', result: 7, consumer: c.id, attempts: 1 });
      await within(c.close({ timeoutMs: 0 }), 10_000, 'close');
    } finally {
      // Bounded: a consumer stuck on a read that never settles must not hang the file.
      await Promise.race([c.close({ timeoutMs: 0 }), pause(200)]);
      await own.close();
    }
  });
});

/** The CLIENT LIST line of a connection named `name` blocked in XREAD, if there is one. */
function blockedRead(list: string, name: string): string | undefined {
  return list
    .split('\n')
    .find((l) => l.includes(` name=${name} `) && / cmd=xread( |$)/.test(l) && / flags=\w*b/.test(l));
}

/**
 * One job whose `complete` reply the proxy drops (the server stored it): what the consumer then
 * reported (outcome events, error codes) and the job's row, once an outcome came; close() is
 * awaited with a bound, so a consumer stuck on an unsettled call fails the test, not the file.
 */
/** The name complete goes by as a function of the runtime's library (what FCALL sends). */
const completeFunction = library().functions.get('complete')?.name ?? 'no complete function';

async function completionWithLostReply(
  q: Queue<number, number>,
  redisOptions: { autoResendUnfulfilledCommands?: boolean } = {},
) {
  const proxy = await ReplyDropper.start(env.server.port);
  const via = await EchoMQ.connect({ url: `redis://127.0.0.1:${proxy.port}`, redisOptions });
  const outcomes: string[] = [];
  const errors: string[] = [];
  const started = deferred();
  const release = deferred();
  // The runtime sends complete by FCALL of its library (src/wire/functions.ts); the consumer's
  // first claim loads the library, so the complete below is the FCALL itself, not a load retry.
  const c = via.queue<number, string>(q.name).consume(
    async () => {
      started.resolve();
      await release.promise;
      return 'stored';
    },
    // Nothing else on the connection while the reply is in flight: no extension, no beat.
    { concurrency: 1, extendMs: 60_000, beatMs: 60_000 },
  );
  c.on('completed', (job) => outcomes.push(`completed ${job.id}`));
  c.on('lost', (job) => outcomes.push(`lost ${job.id}`));
  c.on('error', (err) => errors.push(String((err as { code?: string }).code)));
  try {
    const { id } = await q.enqueue(1);
    await within(started.promise, 3000, 'the handler');
    const dropped = proxy.dropReplyTo(completeFunction);
    release.resolve();
    await within(dropped, 3000, 'the complete reply to be dropped');
    await poll(
      async () => outcomes.length,
      (n) => n > 0,
      'an outcome event',
      10_000,
    );
    const row = await q.get(id);
    await within(c.close({ timeoutMs: 0 }), 10_000, 'close');
    return { id, outcomes, errors, row };
  } finally {
    await Promise.race([c.close({ timeoutMs: 0 }), pause(200)]);
    await Promise.race([via.close(), pause(2000)]); // bounded too: it waits for that consumer
    await proxy.close();
  }
}

describe('replies lost to a dropped connection', () => {
  // BUG: when the connection drops after `complete` ran but before its reply arrived, ioredis
  // resends the EVALSHA on reconnect; the second run finds the job already completed (by this very
  // lease) and answers EMQLEASE, so Consumer.sendAcks() (src/consumer.ts ~line 528) emits 'lost'
  // ("the result was not stored") for a job whose result was stored. Expected: 'completed';
  // actual: 'lost'. Fix (protocol/scripts/complete.lua, the per-job check): treat a row that is
  // already `completed` with the same token as 'OK' (the token only changes on a claim, so this is
  // the same lease's completion replayed); fail.lua could do the same for a replayed failure.
  it('a completion whose reply was lost and resent is reported completed, not lost', async ({ q }) => {
    const { id, outcomes, row } = await completionWithLostReply(q);
    expect(row).toMatchObject({ state: 'completed', attempts: 1, result: 'stored' });
    expect(outcomes).toEqual([`completed ${id}`]);
  });

  // With redisOptions.autoResendUnfulfilledCommands: false, ioredis neither resends nor settles a
  // command that was in flight when its connection dropped: the consumer awaited that `complete`
  // forever, the job stayed held and close() never resolved. The connector now settles such a
  // command with a connection error, and the acknowledgement is sent again: the replay of a
  // completion already stored under the same token is answered OK (complete.lua).
  it('without ioredis resend, the lost reply is settled, the completion sent again and reported completed; close resolves', async ({
    q,
  }) => {
    const { id, outcomes, errors, row } = await completionWithLostReply(q, {
      autoResendUnfulfilledCommands: false,
    });
    expect(outcomes).toEqual([`completed ${id}`]);
    expect(errors).toContain('EMQNOSERVER'); // the dropped call was reported, not swallowed
    expect(row).toMatchObject({ state: 'completed', attempts: 1, result: 'stored' });
  });
});
