// The EchoMQ side of the bench: the public API only (EchoMQ.connect, enqueue, enqueueMany,
// enqueueIn, consume). Every session is its own EchoMQ.connect(), so its own connection.
import { EchoMQ, PROTOCOL_VERSION, type ScriptsMode } from '../../src/index.js';
import {
  type Adapter,
  type ConsumeHooks,
  type Data,
  inFlight,
  type Runner,
  type Session,
  sleep,
} from './adapter.js';

/** The protocol version new queues are stamped with (bench/run.ts --protocol; SPEC 22.3). */
let protocolVersion = Number(PROTOCOL_VERSION) as 1 | 2;

export function useProtocolVersion(version: 1 | 2): void {
  protocolVersion = version;
}

const B32 = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/** The instant an occurrence id stands for ('JOB' + 10 base32 characters + ':r:' or ':s:'). */
function slotOf(id: string): number | undefined {
  const m = /^JOB([0-9A-Z]{10}):[rs]:/.exec(id);
  if (!m) return undefined;
  let at = 0;
  for (const ch of m[1]!) at = at * 32 + B32.indexOf(ch);
  return at;
}

/** SCRIPTS_VIA=eval|functions: connect's `scripts` (unset: its default, functions). */
export function scriptsVia(): ScriptsMode | undefined {
  return process.env.SCRIPTS_VIA as ScriptsMode | undefined;
}

export const echomqAdapter: Adapter = {
  name: 'EchoMQ',
  async open(url: string, name: string): Promise<Session> {
    const mq = await EchoMQ.connect({ url, protocolVersion, scripts: scriptsVia() });
    const queue = mq.queue<Data, void>(name);
    return {
      async add(data) {
        await queue.enqueue(data);
      },
      async addBulk(items) {
        await queue.enqueueMany(items.map((data) => ({ data })));
      },
      async addBulkGrouped(items) {
        await queue.enqueueMany(items.map(({ data, group }) => ({ data, opts: { group } })));
      },
      async addDelayed(items, delayMs) {
        const ids = await inFlight(items, 100, async (data) => (await queue.enqueueIn(data, delayMs)).id);
        // The intended instant is the row's `runat`: the server's TIME in schedule + delayMs.
        // Read right after admission, long before the delay runs out (and any retention trim).
        const pipeline = mq.connector.client.pipeline();
        for (const id of ids) pipeline.hget(queue.keys.job(id), 'runat');
        const replies = (await pipeline.exec()) ?? [];
        return ids.map((id, i) => {
          const [err, runat] = replies[i] ?? [new Error('no reply'), null];
          if (err || runat === null) throw new Error(`no runat for ${id}: ${String(err)}`);
          return { id, runAt: Number(runat) };
        });
      },
      async addOneDelayed(data, delayMs) {
        const { id } = await queue.enqueueIn(data, delayMs);
        // The intended instant is the row's `runat` (the server's TIME in schedule + delayMs).
        return { id, runAt: Number(await mq.connector.client.hget(queue.keys.job(id), 'runat')) };
      },
      async addRecurring(kind, id, everyMs, data) {
        if (kind === 'every') await queue.schedulers.upsert(id, { every: everyMs }, { data });
        else await queue.repeat.register(id, everyMs, data, { firstRunMs: Date.now() });
      },
      async removeRecurring(kind, id) {
        if (kind === 'every') await queue.schedulers.remove(id);
        else await queue.repeat.unregister(id);
      },
      async hold(n, leaseMs) {
        let held = 0;
        while (held < n) {
          const got = await queue.claim(Math.min(1000, n - held), { leaseMs });
          if (got.length === 0) break;
          held += got.length;
        }
        return held;
      },
      async checkStalled() {
        let recovered = 0;
        for (;;) {
          // expectedMs: the bench's gaps between checks are not clock jumps.
          const r = await queue.sweepStalled({ maxStalled: 1, batch: 100, expectedMs: 3_600_000 });
          recovered += r.recovered.length + r.dead.length;
          if (r.recovered.length + r.dead.length < 100) return recovered;
        }
      },
      async consume(concurrency: number, hooks: ConsumeHooks): Promise<Runner> {
        const { onStart, onCompleted, workMs } = hooks;
        let consumer: ReturnType<typeof queue.consume> | undefined;
        return {
          start() {
            consumer = queue.consume(
              async (job) => {
                onStart?.(job.id, job.data, slotOf(job.id));
                const ms = workMs?.(job.data);
                if (ms) await sleep(ms);
              },
              { concurrency },
            );
            if (onCompleted) consumer.on('completed', onCompleted);
          },
          async close() {
            await consumer?.close();
          },
        };
      },
      async close() {
        await mq.close();
      },
    };
  },
};
