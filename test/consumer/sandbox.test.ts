// Sandboxed handlers (src/consumer/sandbox): a handler file run in worker threads or child
// processes of a pool, on a real redis-server with several consumers. The handlers live in
// test/support/handlers; the CPU-spin and crash cases run in the sandboxes, never in this process.
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import type { SandboxKind } from '../../src/consumer/sandbox/pool.js';
import { EchoMQError } from '../../src/core/errors.js';
import type { Queue } from '../../src/queue/queue.js';
import { helperFixtures, type QueueTestContext, queueTest, useRedisServer } from '../support/harness.js';
import { deferred } from '../support/wait.js';

const env = useRedisServer();
const HANDLERS = join(import.meta.dirname, '..', 'support', 'handlers');
const handler = (name: string) => join(HANDLERS, name);

// ── helpers ─────────────────────────────────────────────────────────────────────
/** The file's helpers over one test's queue. */
function helpers({ q, consumers }: Pick<QueueTestContext<unknown, unknown>, 'q' | 'consumers'>) {
  /** Starts a consumer running `file` in `kind` sandboxes; it is closed after the test. */
  function consume(file: string, kind: SandboxKind, opts: Parameters<Queue['consume']>[1] = {}) {
    const c = q.consume(handler(file), { sandbox: kind, concurrency: 2, ...opts });
    consumers.push(c);
    return c;
  }
  return { consume };
}
type Helpers = ReturnType<typeof helpers>;

const it = queueTest<unknown, unknown>(env, 'sandbox')
  .extend<{ h: Helpers }>({ h: async ({ q, consumers }, use) => use(helpers({ q, consumers })) })
  .extend<Helpers>(helperFixtures<Helpers>(['consume']));

// ── sandboxes ───────────────────────────────────────────────────────────────────

const KINDS: SandboxKind[] = ['thread', 'process'];

describe('a handler file in sandboxes', () => {
  for (const kind of KINDS) {
    it(`${kind}: runs the jobs of two consumers, each once, with progress and log lines crossing over`, async ({
      q,
      consume,
    }) => {
      const completed: string[] = [];
      for (let i = 0; i < 2; i++) consume('echo.mjs', kind).on('completed', (job) => completed.push(job.id));
      const ids: string[] = [];
      for (let n = 1; n <= 6; n++) ids.push((await q.enqueue(n)).id);
      const results = (await Promise.all(ids.map((id) => q.waitFor(id, { timeoutMs: 20_000 })))) as {
        doubled: number;
        pid: number;
        threadId: number;
      }[];
      expect(results.map((r) => r.doubled)).toEqual([2, 4, 6, 8, 10, 12]);
      // Not in this process's main thread: another process, or another thread of this one.
      for (const r of results) {
        if (kind === 'process') expect(r.pid).not.toBe(process.pid);
        else expect(r.threadId).toBeGreaterThan(0);
      }
      expect(completed.sort()).toEqual([...ids].sort());
      const row = await q.get(ids[0]!);
      expect(row?.progress).toEqual({ step: 1 });
      expect(row?.attempts).toBe(1);
      expect((await q.logs(ids[0]!)).logs).toEqual(['doubling 1']);
    });

    it(`${kind}: a handler spinning the CPU for 3x the lease keeps its lease and completes once`, async ({
      q,
      consume,
    }) => {
      const leaseMs = 1500;
      const lost: string[] = [];
      let completions = 0;
      // Two consumers reaping often: a lease that ran out would be taken over by the other.
      for (let i = 0; i < 2; i++) {
        const c = consume('spin.mjs', kind, { leaseMs, beatMs: 100, concurrency: 1 });
        c.on('lost', (job) => lost.push(job.id));
        c.on('completed', () => {
          completions += 1;
        });
      }
      const { id } = await q.enqueue(3 * leaseMs);
      expect(await q.waitFor(id, { timeoutMs: 30_000 })).toBe('spun');
      const row = await q.get(id);
      expect(row?.attempts).toBe(1);
      expect(row?.stalled).toBe(0);
      expect(lost).toEqual([]);
      expect(completions).toBe(1);
    });

    it(`${kind}: process.exit in the handler fails that attempt with the exit code, and the retry runs`, async ({
      q,
      consume,
    }) => {
      const failures: string[] = [];
      for (let i = 0; i < 2; i++) {
        consume('exit.mjs', kind).on('failed', (_job, err, outcome) =>
          failures.push(`${outcome}: ${err.message}`),
        );
      }
      const { id } = await q.enqueue(null, { backoff: { kind: 'fixed', ms: 1 } });
      expect(await q.waitFor(id, { timeoutMs: 20_000 })).toBe('attempt 2');
      expect(failures).toHaveLength(1);
      expect(failures[0]).toMatch(/^retry: EMQSANDBOX: the sandbox (thread|process \d+) exited with code 3/);
    });

    it(`${kind}: a cancel aborts the signal inside the sandbox`, async ({ q, consume }) => {
      const outcome = deferred<string>();
      consume('until-aborted.mjs', kind, { leaseMs: 1500 }).on('failed', (_job, err, how) =>
        outcome.resolve(`${how} ${err.message}`),
      );
      const { id } = await q.enqueue(null);
      const started = deferred();
      const events = q.events({ from: '0' });
      events.subscribe((e) => e.id === id && started.resolve(), 'active');
      await started.promise;
      await events.close();
      await q.cancel(id);
      expect(await outcome.promise).toMatch(/^cancelled EMQCANCELLED/);
      expect((await q.get(id))?.state).toBe('cancelled');
    });

    it(`${kind}: an UnrecoverableError thrown in the sandbox dead-letters the job at once`, async ({
      q,
      consume,
    }) => {
      const outcome = deferred<string>();
      consume('unrecoverable.mjs', kind).on('failed', (_job, _err, how) => outcome.resolve(how));
      const { id } = await q.enqueue(null, { attempts: 5 });
      expect(await outcome.promise).toBe('dead');
      expect((await q.get(id))?.attempts).toBe(1);
    });

    it(`${kind}: a TypeScript handler file runs with execArgv ['--import', 'tsx']`, async ({
      q,
      consume,
    }) => {
      consume('typed.ts', kind, { sandboxOptions: { execArgv: ['--import', 'tsx'] } });
      const { id } = await q.enqueue({ qty: 3, price: 7 });
      expect(await q.waitFor(id, { timeoutMs: 20_000 })).toBe(21);
    });
  }

  it('process: a SIGKILLed sandbox fails that attempt with the signal, and the retry runs', async ({
    q,
    consume,
  }) => {
    const failures: string[] = [];
    for (let i = 0; i < 2; i++) {
      consume('sigkill.mjs', 'process').on('failed', (_job, err) => failures.push(err.message));
    }
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await q.enqueue(i, { backoff: { kind: 'fixed', ms: 1 } })).id);
    for (const id of ids) expect(await q.waitFor(id, { timeoutMs: 20_000 })).toBe('attempt 2');
    expect(failures).toHaveLength(3);
    for (const f of failures)
      expect(f).toMatch(/the sandbox process \d+ was killed by SIGKILL while running the job/);
    expect(await q.counts()).toMatchObject({ completed: 3, pending: 0, active: 0, dead: 0 });
  });

  it('thread: a CPU-bound handler past its timeoutMs is ended abortGraceMs later; the next job gets a fresh sandbox', async ({
    q,
    consume,
  }) => {
    const failed = deferred<string>();
    const c = consume('spin.mjs', 'thread', { concurrency: 1, sandboxOptions: { abortGraceMs: 50 } });
    c.on('failed', (_job, err, outcome) => failed.resolve(`${outcome} ${err.message}`));
    const stuck = await q.enqueue(600_000, { timeoutMs: 200, attempts: 1 });
    expect(await failed.promise).toMatch(/^dead EMQTIMEOUT: job \S+ ran past its timeout of 200 ms/);
    const { id } = await q.enqueue(1);
    expect(await q.waitFor(id, { timeoutMs: 20_000 })).toBe('spun');
    expect((await q.get(stuck.id))?.state).toBe('dead');
  });

  it('thread: a handler past its resourceLimits fails that attempt (out of memory), the consumer runs on', async ({
    q,
    consume,
  }) => {
    const failed = deferred<string>();
    const c = consume('hog.mjs', 'thread', {
      sandboxOptions: { resourceLimits: { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 4 } },
    });
    c.on('failed', (_job, err) => failed.resolve(err.message));
    await q.enqueue(null, { attempts: 1 });
    expect(await failed.promise).toMatch(/EMQSANDBOX: the sandbox thread exited with code \d+ \(.*memory/i);
  });
});

describe('bad sandbox input, refused at consume()', () => {
  it('a path that does not exist', ({ q }) => {
    expect(() => q.consume(handler('missing.mjs'), { sandbox: 'thread' })).toThrow(
      /EMQINPUT: the handler file .*missing\.mjs does not exist/,
    );
  });

  it('a file that exports no function', ({ q }) => {
    const call = () => q.consume(handler('no-export.mjs'), { sandbox: 'process' });
    expect(call).toThrow(EchoMQError);
    expect(call).toThrow(/EMQINPUT: the handler file .*no-export\.mjs exports no function/);
  });

  it('a sandbox kind, option or combination that does not apply', ({ mq, q }) => {
    expect(() => q.consume(handler('echo.mjs'), { sandbox: 'fiber' as SandboxKind })).toThrow(
      /sandbox must be 'thread' or 'process'/,
    );
    expect(() => q.consume(async () => 1, { sandbox: 'thread' })).toThrow(
      /sandbox takes the path of a handler file/,
    );
    expect(() =>
      q.consume(handler('echo.mjs'), { sandbox: 'process', sandboxOptions: { resourceLimits: {} } }),
    ).toThrow(/resourceLimits applies to sandbox 'thread' only/);
    expect(() =>
      q.consume(handler('echo.mjs'), { sandbox: 'thread', sandboxOptions: { nice: 1 } as never }),
    ).toThrow(/unknown sandbox option "nice"/);
    expect(mq.queue(q.name).consumers).toHaveLength(0);
  });
});
