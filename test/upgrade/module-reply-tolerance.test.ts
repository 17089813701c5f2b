// The native module's callers hold to the evolution rule (SPEC 22.1, 26): against a build of the
// module that answers as a later feature level may (`make later-level`: EMQ.PROMOTE and
// EMQ.STALLED.CHECK append entries after today's), the TypeScript runtime's promote and
// recovery legs and its direct calls read the entries they know and carry on. Delayed jobs run,
// none early, and an expired lease is recovered by the module's sweep and completed.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { EchoMQ } from '../../src/queue/echomq.js';
import { queueTest, useRedisServer } from '../support/harness.js';
import { nativeModule } from '../support/native-module.js';
import { ROOT } from '../support/run-process.js';
import { poll } from '../support/wait.js';

/** Builds module/build/echomq-later-level.so where the module itself can be built. */
function laterLevelModule(): string | undefined {
  if (!nativeModule.path) return undefined;
  execFileSync('make', ['-s', '-C', join(ROOT, 'module'), 'later-level'], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return join(ROOT, 'module', 'build', 'echomq-later-level.so');
}

const later = laterLevelModule();
const env = useRedisServer({ args: later ? ['--loadmodule', later, 'timers', 'off'] : [] });
const it = queueTest<{ n: number }, number>(env, 'module-later');

describe.skipIf(!later)("the module's callers read a later level's replies", () => {
  if (!later) console.warn(nativeModule.missing);

  it('promotes, recovers and sweeps through module commands whose replies carry later entries', async ({
    q,
    raw,
    key,
    consumers,
    others,
  }) => {
    const mq = await EchoMQ.connect({ url: env.server.url, module: 'require' });
    others.push(mq);
    const jobs = mq.queue<{ n: number }, number>(q.name);
    // The build in use is a later level's: its promote reply has 2 entries after today's 4.
    const direct = (await raw.call(
      'EMQ.PROMOTE',
      '2',
      key('schedule'),
      key('pending'),
      key(''),
      '10',
      'next',
    )) as unknown[];
    expect(direct).toHaveLength(6);
    expect(direct.slice(4)).toEqual([[1, 2], 9]);
    const swept = (await raw.call(
      'EMQ.STALLED.CHECK',
      '3',
      key('active'),
      key('pending'),
      key('dead'),
      key(''),
      '1',
      '10',
    )) as unknown[];
    expect(swept).toEqual([[], [], [1, 2], 9]);

    // A lease left to expire: the module's sweep (recovery 'stalled') hands it back.
    const stale = await jobs.enqueue({ n: 0 });
    const [held] = await jobs.claim(1, { leaseMs: 200 });
    expect(held!.id).toBe(stale.id);
    const ids = [stale.id];
    // Due a second out, so none is due yet when promoteNext reads the later reply, however slow
    // the 20 serial enqueues run on a loaded machine.
    for (let n = 1; n <= 20; n++) ids.push((await jobs.enqueueIn({ n }, 1000 + 20 * n)).id);
    expect(await jobs.promoteNext()).toMatchObject({ count: 0 });

    const c = jobs.consume(async (job) => job.data.n, {
      concurrency: 4,
      beatMs: 100,
      recovery: 'stalled',
      maxStalled: 1,
    });
    consumers.push(c);
    const views = await poll(
      async () => Promise.all(ids.map((id) => jobs.get(id))),
      (vs) => vs.every((v) => v?.state === 'completed'),
      'every job completed',
      30_000,
    );
    for (const [n, v] of views.entries()) {
      expect(v!.result).toBe(n);
      if (n > 0) expect(v!.startedAt!).toBeGreaterThanOrEqual(v!.runAt!);
    }
    expect(views[0]!.stalled).toBe(1);
    expect(await jobs.sweepStalled()).toEqual({ recovered: [], dead: [] });
  });
});
