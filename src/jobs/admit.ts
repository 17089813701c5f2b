// Admitting jobs (enqueue, enqueueMany, enqueueAt/In): each job's options encoded once
// (wire/admission.ts), then sent by the admission verbs. The enqueues of one tick travel as one
// call (a large tick's worth as two); a bulk add goes in chunks of 1,000, two in flight.
import { knownKeys } from '../core/check.js';
import { EchoMQError, optionsObject } from '../core/errors.js';
import type { EnqueueOptions, EnqueueStatus, ScheduleStatus } from '../core/types.js';
import { type Admission, encodeJob } from '../wire/admission.js';
import type { Durability, Replication } from '../wire/durability.js';
import type { QueueWire } from '../wire/queue-wire.js';
import * as verbs from '../wire/verbs/index.js';

const CHUNK = 1000;
/** enqueueMany's smallest slice: below it a call's fixed cost outweighs the overlap. */
const SLICE_MIN = 250;
const MANY_ITEM_KEYS = new Set(['data', 'opts']);
const MANY_OPTIONS = new Set(['durability']);

type Admitted = { id: string; status: EnqueueStatus };

export class Admissions {
  private batch: {
    job: Admission;
    durability: Replication | undefined;
    resolve: (r: Admitted) => void;
    reject: (e: unknown) => void;
  }[] = [];

  constructor(private readonly w: QueueWire) {}

  /** One job, sent with the other enqueues of this tick. */
  enqueue(data: unknown, opts: EnqueueOptions | undefined): Promise<Admitted> {
    this.w.connector.assertOpen();
    const { job, durability } = this.admitOptions(data, opts);
    return new Promise<Admitted>((resolve, reject) => {
      if (this.batch.push({ job, durability, resolve, reject }) === 1) process.nextTick(() => this.flush());
    });
  }

  /** One job's admission and the durability its call asks for (an option of the call, not the job). */
  private admitOptions(data: unknown, opts: EnqueueOptions | undefined) {
    // Most enqueues pass no options: nothing to copy or check beyond what encodeJob does.
    if (opts === undefined) {
      return {
        job: encodeJob(data, undefined, this.w.limits),
        durability: this.w.durabilityFor(undefined, 'enqueue'),
      };
    }
    const { durability, ...rest } = optionsObject(opts, 'enqueue options');
    return {
      job: encodeJob(data, rest, this.w.limits),
      durability: this.w.durabilityFor(durability, 'enqueue'),
    };
  }

  private flush(): void {
    const batch = this.batch;
    this.batch = [];
    // A serial producer's tick holds one job: its call, with none of the batch's arrays.
    if (batch.length === 1) {
      const b = batch[0]!;
      verbs.enqueue(this.w, [b.job], b.durability).then(
        (statuses) => b.resolve(statuses[0]!),
        (err) => b.reject(err),
      );
      return;
    }
    // A large tick's worth goes as two calls: Redis runs one while the replies of the other
    // let callers add the next jobs (one call would leave one side idle each round trip).
    // Calls that ask for replicas travel apart from those that do not (one WAIT per batch).
    const durable = batch.filter((b) => b.durability);
    if (durable.length > 0 && durable.length < batch.length) {
      this.batch = batch.filter((b) => !b.durability);
      this.flush();
      this.batch = durable;
      this.flush();
      return;
    }
    const size = batch.length >= 64 ? Math.min(CHUNK, Math.ceil(batch.length / 2)) : CHUNK;
    for (let i = 0; i < batch.length; i += size) {
      const part = batch.slice(i, i + size);
      verbs
        .enqueue(
          this.w,
          part.map((b) => b.job),
          strictest(part.map((b) => b.durability)),
        )
        .then(
          (statuses) => {
            for (const [j, b] of part.entries()) b.resolve(statuses[j]!);
          },
          (err) => {
            for (const b of part) b.reject(err);
          },
        );
    }
  }

  /** Many jobs, in input order. */
  async many(
    items: readonly { data: unknown; opts?: EnqueueOptions }[],
    options: { durability?: Durability | false } | undefined,
  ): Promise<Admitted[]> {
    this.w.connector.assertOpen();
    const { durability: asked } = knownKeys(
      optionsObject(options, 'enqueueMany options'),
      MANY_OPTIONS,
      'enqueueMany option',
    );
    const durability = this.w.durabilityFor(asked, 'enqueueMany');
    if (!Array.isArray(items)) {
      throw new EchoMQError('EMQINPUT', 'enqueueMany takes an array of { data, opts? }');
    }
    // Refuse bad input before the wire.
    const jobs = items.map((it) => {
      if (typeof it !== 'object' || it === null) {
        throw new EchoMQError('EMQINPUT', 'enqueueMany takes an array of { data, opts? }');
      }
      // A job option beside data ({ data, id }) would otherwise be dropped without a word.
      knownKeys(it, MANY_ITEM_KEYS, 'enqueueMany item field', ' (job options go under opts)');
      return encodeJob(it.data, it.opts, this.w.limits);
    });
    const out: Admitted[] = new Array(jobs.length);
    // Every job was validated and encoded above, before anything is sent (nothing half-written).
    // They go in slices with two calls in flight, so Redis runs one slice while this process
    // serialises the next and reads the last's reply: a single call of 1,000 would leave Redis
    // idle while it is written and Node idle while it runs.
    const slice = Math.min(CHUNK, Math.max(SLICE_MIN, Math.ceil(jobs.length / 4)));
    let next = 0;
    const lane = async () => {
      while (next < jobs.length) {
        const start = next;
        next += slice;
        const part = jobs.slice(start, start + slice);
        const statuses = await verbs.enqueue(this.w, part, durability);
        for (const j of part.keys()) out[start + j] = statuses[j]!;
      }
    };
    await Promise.all([lane(), lane()]);
    return out;
  }

  /** One job held out of pending until `at` (epoch ms) or `in` ms from now (server clock). */
  async schedule(
    data: unknown,
    mode: 'at' | 'in',
    value: number,
    opts: EnqueueOptions | undefined,
  ): Promise<{ id: string; status: ScheduleStatus }> {
    this.w.connector.assertOpen();
    const { job: j, durability } = this.admitOptions(data, opts);
    if (j.lifo !== '') {
      throw new EchoMQError(
        'EMQINPUT',
        'lifo applies to enqueue: a scheduled job is released by its priority',
      );
    }
    return verbs.schedule(this.w, j, mode, value, durability);
  }
}

/** The most replicas any of a batch's calls asks for, and the longest wait; none when none asks. */
function strictest(asked: (Replication | undefined)[]): Replication | undefined {
  const some = asked.filter((a): a is Replication => a !== undefined);
  if (some.length === 0) return undefined;
  return {
    replicas: Math.max(...some.map((a) => a.replicas)),
    timeoutMs: Math.max(...some.map((a) => a.timeoutMs)),
  };
}
