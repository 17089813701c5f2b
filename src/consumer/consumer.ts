// The consumer: runs a handler over a queue's jobs under leases. Its beat, in order:
//   1. control  — stop when closing; a paused queue simply claims nothing
//   2. ttl      — close itself once ttlMs has elapsed
//   3. recover  — reap expired leases (or the count-thresholded stalled sweep), once a beat
//   4. promote  — release due scheduled jobs; learn the next due instant for a timer
//   5. drain    — claim up to the free slots in one call
//   6. park     — block on the wake stream until work or a schedule change arrives, the next due
//                 instant, or the beat (also while every slot is busy)
// Finished jobs are acknowledged in batches (every completion of one tick in one `complete`
// call) and the same call claims the next jobs, so a busy consumer needs about one round trip
// per batch of jobs and never a timer per job. Leases of all running jobs are extended by one
// `extend_lock` call per period. A wire error on any leg skips the rest of the beat and backs
// off exponentially (degraded); a healthy beat resets it.

import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { Redis } from 'ioredis';
import { updateData } from '../control.js';
import { Backoff, type BackoffPolicy } from '../core/backoff.js';
import { atLeast, knownKeys } from '../core/check.js';
import { encodeJson, parseMaybe } from '../core/codec.js';
import { EchoMQError, optionsObject, showValue, thrownError } from '../core/errors.js';
import type { Handler, Job, JobContext } from '../core/types.js';
import { DEFAULT_LOG_LINE_BYTES, DEFAULT_LOG_LINES, logLine } from '../logs.js';
import type { Queue } from '../queue.js';
import type { RedisClient } from '../wire/connector.js';
import type { Durability, Replication } from '../wire/durability.js';

export type Recovery = 'reap' | 'stalled' | 'off';

export interface ConsumeOptions {
  /** Handlers running at once in this consumer. Default 10. */
  concurrency?: number;
  /** Lease length in ms: a job whose lease is not extended for this long is recovered. Default 30000. */
  leaseMs?: number;
  /** How often leases are extended (and a cancel request is noticed), in ms. Default leaseMs / 3. */
  extendMs?: number;
  /** The beat in ms: recovery runs and an idle consumer re-checks this often. Default 1000. */
  beatMs?: number;
  /** Recovery of expired leases: 'reap' (default), 'stalled' (dead-letter past maxStalled) or 'off'. */
  recovery?: Recovery;
  /** With recovery 'stalled': recoveries allowed before a job is dead-lettered. Default 1. */
  maxStalled?: number;
  /** Scheduled jobs released per promote call. Default 100. */
  promoteBatch?: number;
  /** Close the consumer after this many ms (a worker that recycles itself). Default: never. */
  ttlMs?: number;
  /** Retry delay for jobs enqueued without their own policy. Default exponential 1 s, cap 5 min. */
  backoff?: BackoffPolicy;
  /** Largest error message / stack stored on the row, in bytes. Default 2048 / 8192. */
  maxErrorBytes?: number;
  maxStackBytes?: number;
  /** Lines a job's log keeps (ctx.log; older ones are trimmed first). Default 100. */
  maxLogLines?: number;
  /** Longest log line in bytes; a longer one is cut and marked. Default 1024. */
  maxLogLineBytes?: number;
  /**
   * Completions resolve only once this many replicas have them (WAIT); one not confirmed is
   * sent again (a resent acknowledgement is idempotent). Default: connect's `durability`.
   */
  durability?: Durability | false;
}

/** Throw (or wrap) this to dead-letter a job at once, whatever attempts it has left. */
export class UnrecoverableError extends Error {
  override readonly name = 'UnrecoverableError';
}

export interface ConsumerEvents {
  completed: [job: Job, result: unknown];
  failed: [job: Job, error: Error, outcome: 'retry' | 'dead' | 'cancelled'];
  /** The lease was taken over (expired and recovered elsewhere): the result was not stored. */
  lost: [job: Job];
  error: [error: unknown];
  degraded: [error: unknown, retryInMs: number];
  recovered: [];
  closed: [];
}

/** Every ConsumeOptions field (the Record makes a new option a compile error until listed). */
const CONSUME_OPTION_FIELDS: Record<keyof ConsumeOptions, true> = {
  concurrency: true,
  leaseMs: true,
  extendMs: true,
  beatMs: true,
  recovery: true,
  maxStalled: true,
  promoteBatch: true,
  ttlMs: true,
  backoff: true,
  maxErrorBytes: true,
  maxStackBytes: true,
  maxLogLines: true,
  maxLogLineBytes: true,
  durability: true,
};
/** Anything else is refused: a misspelt option is no silent default. */
const CONSUME_OPTIONS: ReadonlySet<string> = new Set(Object.keys(CONSUME_OPTION_FIELDS));
const DEFAULT_BACKOFF: BackoffPolicy = { kind: 'exponential', base: 1000, cap: 300_000 };
const WATCHDOG_GRACE_MS = 2000;
/** How late Redis may end a timed blocking read (its cron tick at the default hz 10), plus slack. */
const SERVER_TICK_MS = 150;
const DEGRADED_CAP_MS = 5000;

type Abort = 'cancelled' | 'lost' | 'closing';
/** claim's reply (and complete's after its statuses): jobs, wake id, rate wait, server now, schedule head. */
type ClaimReply = [jobs: unknown[], wakeId: string, waitMs: number, nowMs: number, nextDueMs: number];

class Running<D> implements Job<D>, JobContext {
  private controller: AbortController | undefined;
  aborted: Abort | undefined;
  /** Set when the job left this consumer (handed back, or lost): its outcome is not sent. */
  released = false;
  /** Its lease expired and this same consumer claimed the job again: the old handler still runs. */
  orphaned = false;
  /** The handler ended and its outcome (complete or fail) is queued or in flight: that reply decides. */
  acking = false;
  readonly startedAt = performance.now();
  /** Log lines not sent yet (ctx.log), oldest first. */
  logLines: string[] | undefined;

  constructor(
    private readonly consumer: Consumer<D, unknown>,
    readonly id: string,
    readonly token: string,
    readonly attempts: number,
    readonly maxAttempts: number,
    readonly data: D,
    readonly name: string | undefined,
    readonly backoff: BackoffPolicy | undefined,
  ) {}

  // The controller is made on first use: most handlers never look at the signal.
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort(this.reason());
    }
    return this.controller.signal;
  }

  abort(why: Abort): void {
    if (this.aborted) return;
    this.aborted = why;
    this.controller?.abort(this.reason());
  }

  reason(): EchoMQError {
    if (this.aborted === 'cancelled') return new EchoMQError('EMQCANCELLED', `job ${this.id} was cancelled`);
    if (this.aborted === 'lost') {
      return new EchoMQError(
        'EMQLEASE',
        `job ${this.id} lost its lease (it was recovered by another consumer)`,
      );
    }
    return new EchoMQError(
      'EMQCLOSED',
      `the consumer closed before job ${this.id} finished; it was handed back`,
    );
  }

  checkpoint(): Promise<void> {
    return this.consumer.checkpoint(this);
  }

  progress(value: number | object): Promise<void> {
    return this.consumer.progress(this, value);
  }

  log(line: string): void {
    this.consumer.log(this, line);
  }

  update(data: unknown): Promise<void> {
    return updateData(this.consumer.queue.wire, this.id, data, this.token);
  }

  childrenFailures(): Promise<Record<string, string>> {
    const q = this.consumer.queue;
    return q.connector.client.hgetall(`${q.keys.job(this.id)}:failures`);
  }

  async childrenResults(): Promise<Record<string, unknown>> {
    const q = this.consumer.queue;
    const raw = await q.connector.client.hgetall(`${q.keys.job(this.id)}:results`);
    const out: Record<string, unknown> = {};
    for (const [id, v] of Object.entries(raw)) out[id] = v === '' ? null : parseMaybe(v);
    return out;
  }
}

export class Consumer<D = unknown, R = unknown> extends EventEmitter<ConsumerEvents> {
  /** This consumer's id in heartbeats (host:pid:random). */
  readonly id = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  readonly concurrency: number;
  readonly leaseMs: number;
  readonly extendMs: number;
  readonly beatMs: number;
  readonly recovery: Recovery;
  /** The replicas every completion waits for (consume's or connect's `durability`), if any. */
  readonly durability: Replication | undefined;
  readonly maxStalled: number;
  readonly promoteBatch: number;
  readonly ttlMs: number | undefined;
  private readonly backoff: BackoffPolicy;
  private readonly maxErrorBytes: number;
  private readonly maxStackBytes: number;
  readonly maxLogLines: number;
  private readonly maxLogLineBytes: number;
  /** Held jobs with log lines to send. */
  private readonly logging = new Set<Running<D>>();

  private readonly held = new Map<string, Running<D>>();
  /** Handlers finished but not yet acknowledged: id, token, encoded result. */
  private acks: [Running<D>, string, unknown][] = [];
  private ackScheduled = false;
  /** The one timer that sends failed acknowledgements again (never one per failed call). */
  private ackRetry: NodeJS.Timeout | undefined;
  /** Ends this consumer's registration on its connection (which closes it before itself). */
  private detach: (() => void) | undefined;
  /** Slots promised to claims in flight, so two calls never over-claim. */
  private reserved = 0;
  /** Handlers still running for jobs this consumer lost and then claimed again. */
  private orphans = 0;
  /** The last claim came back short: nothing claimable until a wake, a due timer or the beat. */
  private short = false;
  private wakeId = '0-0';
  private closing = false;
  private closed: Promise<void> | undefined;
  private readonly startedAt = performance.now();
  private lastRecoverAt = Number.NEGATIVE_INFINITY;
  private degradedStreak = 0;
  /** Local performance.now() of the schedule's earliest run-at, from promote's or a claim's reply. */
  private scheduleHeadAt = Number.POSITIVE_INFINITY;
  private lastPromoteAt = Number.NEGATIVE_INFINITY;
  /** This beat's promote call is on the wire (a claim may follow it in the same round trip). */
  private promoting = false;
  /** A wake said the schedule's earliest run-at changed: promote to learn the new one. */
  private scheduleMoved = true;
  /** A wake said a recurring definition changed ('w r'): run the recurrence leg now. */
  private recurrenceMoved = true;
  private limitedUntil = Number.POSITIVE_INFINITY; // when a rate limit lets more be claimed
  private parkTimer: NodeJS.Timeout | undefined;
  /** Local performance.now() the current park ends at by itself. */
  private parkUntil = Number.POSITIVE_INFINITY;
  /** While blocked on the wake stream: end the read in `ms` instead (an earlier due instant). */
  private rearmBlock: ((ms: number) => void) | undefined;
  /** How the loop waits now: asleep on a timer (slots full or work waiting) or blocked on wake. */
  private parked: 'no' | 'sleep' | 'block' = 'no';
  private unpark: (() => void) | undefined;
  private extendTimer: NodeJS.Timeout | undefined;
  private blocking: RedisClient | undefined;
  private blockingId: number | undefined;
  private loopDone: Promise<void> | undefined;
  private readonly idleWaiters: (() => void)[] = [];
  /** recheck() calls so far, and how many had been made when the last full beat began. */
  private rechecks = 0;
  private beatRechecks = 0;
  private unwatchClock: (() => void) | undefined;
  private readonly settledWaiters: (() => void)[] = [];

  constructor(
    readonly queue: Queue<D, R>,
    private readonly handler: Handler<D, R>,
    options?: ConsumeOptions,
  ) {
    super();
    if (typeof handler !== 'function') {
      throw new EchoMQError(
        'EMQINPUT',
        `consume() takes a handler function (job, ctx) => result, got ${handler === null ? 'null' : typeof handler}`,
      );
    }
    const opts = optionsObject(options, 'consume options');
    knownKeys(opts, CONSUME_OPTIONS, 'consume option');
    this.concurrency = atLeast(opts.concurrency ?? 10, 'concurrency', 1);
    this.leaseMs = atLeast(opts.leaseMs ?? 30_000, 'leaseMs', 1);
    this.extendMs = atLeast(opts.extendMs ?? Math.max(1, Math.floor(this.leaseMs / 3)), 'extendMs', 1);
    this.beatMs = atLeast(opts.beatMs ?? 1000, 'beatMs', 1);
    this.recovery = opts.recovery ?? 'reap';
    this.durability = queue.durabilityFor(opts.durability, 'consume');
    if (!['reap', 'stalled', 'off'].includes(this.recovery)) {
      throw new EchoMQError(
        'EMQINPUT',
        `recovery must be 'reap', 'stalled' or 'off', got ${showValue(opts.recovery)}`,
      );
    }
    this.maxStalled = atLeast(opts.maxStalled ?? 1, 'maxStalled', 0);
    this.promoteBatch = atLeast(opts.promoteBatch ?? 100, 'promoteBatch', 1);
    this.ttlMs = opts.ttlMs === undefined ? undefined : atLeast(opts.ttlMs, 'ttlMs', 1);
    this.backoff = Backoff.validate(opts.backoff ?? DEFAULT_BACKOFF);
    this.maxErrorBytes = atLeast(opts.maxErrorBytes ?? 2048, 'maxErrorBytes', 1);
    this.maxStackBytes = atLeast(opts.maxStackBytes ?? 8192, 'maxStackBytes', 1);
    this.maxLogLines = atLeast(opts.maxLogLines ?? DEFAULT_LOG_LINES, 'maxLogLines', 1);
    this.maxLogLineBytes = atLeast(opts.maxLogLineBytes ?? DEFAULT_LOG_LINE_BYTES, 'maxLogLineBytes', 32);
    // An 'error' with no listener would crash the process; a consumer reports and carries on.
    this.on('error', () => {});
  }

  /** Starts the beat. Called by queue.consume(). */
  start(): this {
    this.detach = this.queue.connector.attach(this);
    const blocking = this.queue.connector.duplicate();
    this.blocking = blocking;
    blocking.on('error', () => {}); // reconnects on its own; the watchdog bounds waits
    // Its client id lets a timer end a blocking read on time (see blockOnWake).
    const learnId = () => {
      if (!(blocking instanceof Redis)) return;
      blocking.client('ID').then(
        (id) => {
          this.blockingId = Number(id);
          // A busy loop that parked before the id came sleeps the whole beat, deaf to the wake
          // stream (and so to due instants): park again, now able to block.
          if (this.parked === 'sleep') this.wakeLoop();
        },
        () => {},
      );
    };
    blocking.on('ready', learnId);
    // A test moving a memory engine's clock makes anything due: act on it as on a due instant.
    this.unwatchClock = this.queue.connector.memory?.clock.watch(() => this.recheck());
    this.loopDone = this.loop();
    return this;
  }

  /** Jobs running now. */
  get running(): number {
    return this.held.size;
  }

  private get free(): number {
    return this.concurrency - this.held.size - this.orphans - this.reserved;
  }

  // ── the beat ────────────────────────────────────────────────────────────────

  private async loop(): Promise<void> {
    while (!this.closing) {
      const rechecks = this.rechecks;
      if (this.ttlMs !== undefined && performance.now() - this.startedAt >= this.ttlMs) {
        this.close().catch((err: unknown) => this.emit('error', err));
        break;
      }
      try {
        await this.recover();
        // When a promote is due, the claim goes out with it (pipelined, one round trip): the
        // server runs it right after promote, so released jobs start without another trip.
        const promoted = this.promote();
        const claimed = this.promoting ? this.drain(true) : undefined;
        await Promise.all([promoted, claimed]); // both awaited: neither rejection goes unhandled
        await this.recurring();
        await this.drain();
        if (this.degradedStreak > 0) {
          this.degradedStreak = 0;
          this.emit('recovered');
        }
        this.beatRechecks = rechecks;
      } catch (err) {
        if (this.closing) break;
        if (this.queue.connector.isClosed) {
          void this.close(); // its connection was closed under it: nothing can run any more
          break;
        }
        this.degradedStreak += 1;
        const wait = Math.min(50 * 2 ** this.degradedStreak, DEGRADED_CAP_MS);
        this.emit('degraded', err, wait);
        await this.sleep(wait);
        continue;
      }
      this.settle();
      await this.park();
    }
  }

  /**
   * Runs every leg of the beat now, as if each of its instants had come: recovery (expired
   * leases), promote, recurrence and a claim. A moved memory-engine clock calls it, and so do
   * the testing helpers (echomq/testing), which then await idle(): that waits for a beat begun
   * after this call.
   */
  recheck(): void {
    if (this.closing) return;
    this.rechecks += 1;
    this.lastRecoverAt = Number.NEGATIVE_INFINITY;
    this.scheduleMoved = true;
    this.recurrenceMoved = true;
    this.short = false;
    if (this.limitedUntil !== Number.POSITIVE_INFINITY) this.limitedUntil = performance.now();
    if (this.parked === 'sleep') this.wakeLoop();
    else if (this.parked === 'block') this.rearmBlock?.(0);
  }

  /**
   * A memory engine's clock moves forward on purpose (mq.clock, echomq/testing): that is time
   * that passed, so this consumer reports no gap that would make it a step (SPEC 2.1).
   */
  private get movedOnPurpose(): boolean {
    return this.queue.connector.memory !== undefined;
  }

  /** Recovery per the `recovery` option, and the heartbeat that lists this consumer in tools. */
  private async recover(): Promise<void> {
    const now = performance.now();
    if (now - this.lastRecoverAt < this.beatMs) return;
    // The beat is the gap this consumer leaves between passes: a longer one is a jump (SPEC 2.1).
    const expectedMs = this.movedOnPurpose ? Number.MAX_SAFE_INTEGER : this.beatMs;
    if (this.recovery === 'reap') await this.queue.reap(this.promoteBatch, expectedMs);
    else if (this.recovery === 'stalled') {
      await this.queue.sweepStalled({
        maxStalled: this.maxStalled,
        batch: this.promoteBatch,
        expectedMs,
      });
    }
    await this.queue.run('heartbeat', [
      this.queue.keys.prefix,
      this.id,
      JSON.stringify({
        host: hostname(),
        pid: process.pid,
        concurrency: this.concurrency,
        running: this.held.size,
        beatMs: this.beatMs,
      }),
    ]);
    this.lastRecoverAt = now;
  }

  /**
   * Promote when something may be due: the next due instant came, the schedule's head moved
   * (a wake marked 's'), or a beat passed. A wake for new pending work skips it, so waking
   * costs one call (the claim), not two.
   */
  private async promote(): Promise<void> {
    const at = performance.now();
    this.promoting = false;
    if (!this.scheduleMoved && at < this.scheduleHeadAt && at - this.lastPromoteAt < this.beatMs) return;
    this.scheduleMoved = false;
    // How long this consumer lived since its previous promote: the server clock running
    // further ahead than that was stepped, and the schedule moves by the step (SPEC 2.1).
    const elapsed =
      Number.isFinite(this.lastPromoteAt) && !this.movedOnPurpose ? at - this.lastPromoteAt : undefined;
    this.lastPromoteAt = at;
    this.promoting = true; // set before the first await: loop() reads it to pipeline a claim
    const { count, now, nextDue, handoffs } = await this.queue.promoteNext(this.promoteBatch, elapsed);
    // A cron occurrence was released: its next one is this runtime's to make, now (a 'w r' for
    // its scheduler may have gone unseen, so the leg's own timer cannot be trusted to know).
    if (handoffs > 0) this.recurrenceMoved = true;
    if (count >= this.promoteBatch)
      this.scheduleHeadAt = performance.now(); // more are due: go again
    else this.learnHead(now, nextDue);
    if (count > 0) this.short = false;
  }

  // Recurrence: the Repeat pump and the runtime's share of the schedulers' hand-off (src/repeat.ts,
  // src/scheduler.ts). A Repeat cadence and an `every` scheduler need neither: promote makes the
  // next occurrence when it releases the current one, so their slots never wait for this leg. The leg runs once a beat,
  // when an instant it reported comes (a repeat's slot, a scheduler's occurrence whose next run a
  // runtime computes), and at once when a wake says a definition changed ('w r': register,
  // upsert): a definition made under a parked consumer is served at its instant, not its beat.
  private lastRecurringAt = Number.NEGATIVE_INFINITY;
  private recurringDueAt = Number.POSITIVE_INFINITY; // local performance.now()

  private async recurring(): Promise<void> {
    const at = performance.now();
    if (!this.recurrenceMoved && at - this.lastRecurringAt < this.beatMs && at < this.recurringDueAt) return;
    this.recurrenceMoved = false;
    const [pump, handoff] = await Promise.all([
      this.queue.repeat.pumpNext(this.promoteBatch),
      this.queue.schedulers.advance(this.promoteBatch),
    ]);
    this.lastRecurringAt = at;
    const until = (due: number, now: number) => (due < 0 ? Number.POSITIVE_INFINITY : due - now);
    this.recurringDueAt =
      performance.now() + Math.min(until(pump.nextDue, pump.now), until(handoff.nextDue, handoff.now));
    if (pump.minted.length > 0) this.short = false;
  }

  /** Claims up to the free slots; `afterPromote`: even when short (promote may release work). */
  private async drain(afterPromote = false): Promise<void> {
    if (this.closing) return;
    if (!afterPromote && this.short && performance.now() < this.limitedUntil) return;
    const n = this.free;
    if (n <= 0) return;
    this.reserved += n;
    let reply: ClaimReply;
    try {
      reply = (await this.queue.run('claim', [this.queue.keys.prefix, n, this.leaseMs])) as ClaimReply;
    } finally {
      this.reserved -= n;
    }
    this.started(...reply);
  }

  /** Waits for whichever comes first: new work (wake stream), the next due job, the beat, close. */
  private async park(): Promise<void> {
    if (this.closing) return;
    // A claim that was not short while slots are free stopped early (it dropped its bound of
    // ghosts, or slots freed meanwhile): claim again at once rather than wait for a beat.
    if (!this.short && this.free > 0) return;
    if (this.beatRechecks !== this.rechecks) return; // a recheck came during the beat: beat again
    const untilTtl = this.ttlMs === undefined ? Number.POSITIVE_INFINITY : this.startedAt + this.ttlMs;
    const untilDue = Math.min(this.dueAt(), untilTtl) - performance.now();
    const wait = Math.max(
      0,
      Math.min(this.beatMs - (performance.now() - this.lastRecoverAt), untilDue, this.beatMs),
    );
    if (wait <= 0) return;
    this.parkUntil = performance.now() + wait;
    // Waiting for work, it blocks on the wake stream. Busy (every slot taken), it blocks too when
    // it can end the read on time (CLIENT UNBLOCK): a 'w s' then still reaches it, so it promotes
    // at each due instant and the occurrences it releases make their next ones (no slot skipped
    // while all slots are busy). A 'w 1' it cannot act on only costs one more read.
    if ((this.short && this.free > 0) || this.blockingId !== undefined) {
      this.parked = 'block';
      // A read that ends at the beat may come back a server tick (~100 ms) late: when a due
      // instant follows within that, end it on time too.
      await this.blockOnWake(Math.max(1, Math.ceil(wait)), untilDue <= wait + SERVER_TICK_MS);
    } else {
      this.parked = 'sleep';
      await this.sleep(wait);
    }
    this.parked = 'no';
  }

  /**
   * XREAD BLOCK on the wake stream, bounded by a watchdog that drops a dead connection.
   * Redis times out blocking reads on its cron tick (about 100 ms at the default hz 10), so
   * when a due job or a rate window sets the deadline (`onTime`), a local timer ends the read
   * with CLIENT UNBLOCK at the instant instead: delayed jobs start on time, not a tick late.
   */
  private async blockOnWake(ms: number, onTime: boolean): Promise<void> {
    const conn = this.blocking;
    if (!conn) return;
    // The watchdog does not trust the client to settle a read on a dropped connection (with
    // autoResendUnfulfilledCommands off, ioredis never does): it stops waiting by itself.
    let giveUp!: () => void;
    const gaveUp = new Promise<null>((resolve) => {
      giveUp = () => resolve(null);
    });
    this.unpark = giveUp; // close() ends the wait at once
    const watchdog = setTimeout(() => {
      conn.disconnect(true);
      giveUp();
    }, ms + WATCHDOG_GRACE_MS);
    const id = this.blockingId;
    // The UNBLOCK can overtake a read still on its way to the server (it answers 0: nothing
    // blocked yet); then the read would wait out a whole server tick. Try again until it lands.
    let settled = false;
    const unblock = (tries: number) => {
      if (settled || id === undefined) return;
      this.queue.connector.client.client('UNBLOCK', id).then(
        (n) => {
          if (n === 0 && tries > 0) alarm = setTimeout(() => unblock(tries - 1), 1);
        },
        () => {},
      );
    };
    let alarm = onTime && id !== undefined ? setTimeout(() => unblock(20), ms) : undefined;
    // A claim reply (a job finishing meanwhile) may report an earlier due instant: end the read then.
    this.rearmBlock = (inMs) => {
      if (id === undefined || settled) return;
      clearTimeout(alarm);
      alarm = setTimeout(() => unblock(20), Math.max(0, inMs));
    };
    try {
      const read = conn.xread('BLOCK', ms, 'STREAMS', this.queue.keys.key('wake'), this.wakeId);
      read.catch(() => {}); // a read abandoned by the watchdog may still fail later
      const reply = (await Promise.race([read, gaveUp])) as [string, [string, string[]][]][] | null;
      const entries = reply?.[0]?.[1];
      if (entries && entries.length > 0) {
        this.wakeId = entries[entries.length - 1]![0];
        this.short = false;
        for (const [, fields] of entries) {
          if (fields[1] === 's') this.scheduleMoved = true;
          else if (fields[1] === 'r') this.recurrenceMoved = true;
        }
      }
    } catch (err) {
      if (!this.closing) {
        this.emit('error', err);
        await this.sleep(Math.min(100, ms)); // the connection is coming back; don't spin
      }
    } finally {
      settled = true;
      this.rearmBlock = undefined;
      clearTimeout(watchdog);
      clearTimeout(alarm);
    }
  }

  /** The earliest local instant the loop must act at: the schedule's head, recurrence, a rate window. */
  private dueAt(): number {
    return Math.min(this.scheduleHeadAt, this.recurringDueAt, this.limitedUntil);
  }

  /**
   * Takes in the schedule's earliest run-at as a reply saw it (`now` and `nextDue` are server
   * instants, so only their difference is used). When the loop waits past it, it is woken, or
   * its blocking read is ended, at that instant: a busy consumer promotes on time too.
   */
  private learnHead(now: number, nextDue: number): void {
    this.scheduleHeadAt = nextDue < 0 ? Number.POSITIVE_INFINITY : performance.now() + (nextDue - now);
    if (this.parked === 'no' || this.dueAt() >= this.parkUntil) return;
    if (this.parked === 'sleep') this.wakeLoop();
    else this.rearmBlock?.(this.dueAt() - performance.now());
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.unpark = resolve;
      this.parkTimer = setTimeout(resolve, ms);
    });
  }

  private wakeLoop(): void {
    if (this.parkTimer) clearTimeout(this.parkTimer);
    this.unpark?.();
  }

  // ── running jobs ────────────────────────────────────────────────────────────

  /**
   * Starts the handlers of claimed jobs (claim's flat reply: 7 entries per job), and takes in
   * what the claim saw: the wake id to park after, a rate limit's wait, and the schedule's head.
   * The head was read in the same atomic call as the wake id, so a 'w s' written before that id
   * (while this consumer was busy, or before it parked) is not lost: its instant is the head.
   */
  private started(flat: unknown[], wakeId: string, waitMs: number, now: number, nextDue: number): void {
    this.short = wakeId !== '';
    if (this.short) this.wakeId = wakeId;
    // A rate limit holds work back: park until its window reopens (a timer, not a poll).
    this.limitedUntil = waitMs >= 0 ? performance.now() + waitMs : Number.POSITIVE_INFINITY;
    this.learnHead(now, nextDue);
    for (let i = 0; i < flat.length; i += 7) {
      const id = flat[i] as string;
      const decoded = decodeClaimed(id, flat[i + 4], flat[i + 6]);
      const job = new Running<D>(
        this as Consumer<D, unknown>,
        id,
        String(flat[i + 1]),
        Number(flat[i + 2]),
        Number(flat[i + 3]),
        decoded.data as D,
        (flat[i + 5] as string) || undefined,
        decoded.backoff,
      );
      const old = this.held.get(id);
      if (old) this.lose(old, true); // our own lease expired (an outage) and we claimed it again
      this.held.set(id, job);
      // Bad data never stops the consumer: that job fails (dead-lettered) without a handler
      // run, and the others of the claim start as usual (SPEC section 5.1).
      const run = decoded.bad ? this.failed(job, decoded.bad) : this.execute(job);
      run.catch((err: unknown) => this.emit('error', err));
    }
    if (this.held.size > 0 && !this.extendTimer) {
      this.extendTimer = setInterval(() => void this.extend(), this.extendMs);
    }
  }

  private async execute(job: Running<D>): Promise<void> {
    try {
      await this.runHandler(job);
    } finally {
      if (job.orphaned) {
        job.orphaned = false;
        this.orphans -= 1;
        this.settle();
      }
    }
  }

  private async runHandler(job: Running<D>): Promise<void> {
    let result: R;
    try {
      result = await this.handler(job, job);
    } catch (err) {
      await this.failed(job, thrownError(err, this.maxErrorBytes));
      return;
    }
    if (job.released) return this.finish(job);
    let encoded: string;
    try {
      encoded = result === undefined ? '' : encodeJson(result, 'job result', this.queue.maxPayloadBytes);
    } catch (err) {
      await this.failed(job, err as Error);
      return;
    }
    job.acking = true;
    this.acks.push([job, encoded, result]);
    if (!this.ackScheduled) {
      this.ackScheduled = true;
      process.nextTick(() => this.flushAcks());
    }
  }

  /**
   * Acknowledges every handler that finished this tick, in `complete` calls that also claim
   * the next jobs. The batch goes as two halves when it is large, so Redis works on one while
   * this process starts the jobs the other brought back (one big call leaves one side idle).
   */
  private flushAcks(): void {
    this.ackScheduled = false;
    const acks = this.acks;
    this.acks = [];
    if (acks.length === 0) return;
    const half = Math.max(1, Math.ceil(this.concurrency / 2));
    // Each call claims as many jobs as it acknowledges (those slots free up as it runs); the
    // first also claims the slots that are free already. Computed before any call reserves.
    let spare = this.closing ? 0 : Math.max(0, this.free);
    for (let i = 0; i < acks.length; i += half) {
      const part = acks.slice(i, i + half);
      this.sendAcks(part, this.closing ? 0 : part.length + spare).catch((err: unknown) =>
        this.emit('error', err),
      );
      spare = 0;
    }
  }

  private async sendAcks(acks: [Running<D>, string, unknown][], n: number): Promise<void> {
    if (this.logging.size > 0) this.sendLogs(); // on the wire just before the acknowledgement
    const argv: (string | number)[] = [this.queue.keys.prefix, this.leaseMs, n];
    for (const [job, result] of acks) argv.push(job.id, job.token, result);
    this.reserved += n;
    let reply: [string[], ...ClaimReply];
    try {
      reply = (await this.queue.run('complete', argv, undefined, this.durability)) as [
        string[],
        ...ClaimReply,
      ];
    } catch (err) {
      this.reserved -= n;
      if (this.queue.connector.isClosed) {
        // Nothing can be sent any more: the leases run out and recovery returns the jobs.
        for (const [job] of acks) this.finish(job);
        return;
      }
      // Not acknowledged: keep the jobs held (their leases keep being extended) and retry. One
      // timer for every part that failed: a retry sends every held acknowledgement again.
      this.emit('error', err);
      this.acks.unshift(...acks);
      this.ackRetry ??= setTimeout(() => {
        this.ackRetry = undefined;
        if (!this.ackScheduled) {
          this.ackScheduled = true;
          this.flushAcks();
        }
      }, 100);
      return;
    }
    this.reserved -= n;
    const [statuses, ...claimed] = reply;
    for (const [i, [job, , result]] of acks.entries()) {
      this.finish(job);
      if (statuses[i] === 'OK') this.emit('completed', job, result);
      else this.lose(job, false);
    }
    if (n > 0) this.started(...claimed);
    else this.learnHead(claimed[3], claimed[4]);
    this.watchForWork();
    this.settle();
  }

  private async failed(job: Running<D>, cause: Error): Promise<void> {
    let error = cause;
    if (job.released) return this.finish(job);
    // From here the fail's reply decides: an extension that finds the lease gone because this
    // very fail was stored must not report the job lost.
    job.acking = true;
    const unrecoverable = error instanceof UnrecoverableError || job.aborted === 'cancelled';
    // -1 tells the script "never retry" (reason unrecoverable); on the last attempt the
    // script dead-letters by the count itself (reason error), so any delay will do.
    let delay = unrecoverable ? -1 : 0;
    if (!unrecoverable && job.attempts < job.maxAttempts) {
      try {
        delay = Backoff.delayMs(job.backoff ?? this.backoff, job.attempts);
      } catch (err) {
        delay = -1; // a policy that cannot say when to retry never will
        error = badData(job.id, 'backoff', err);
      }
    }
    const message = clip(error.message || String(error), this.maxErrorBytes);
    const stack = clip(error.stack ?? '', this.maxStackBytes);
    for (;;) {
      if (this.logging.size > 0) this.sendLogs();
      try {
        const outcome = (await this.queue.run(
          'fail',
          [this.queue.keys.prefix, job.id, job.token, message, stack, delay],
          job.id,
        )) as 'retry' | 'dead' | 'cancelled';
        this.finish(job);
        this.emit('failed', job, error, outcome);
        break;
      } catch (err) {
        if (err instanceof EchoMQError && (err.code === 'EMQLEASE' || err.code === 'EMQNOJOB')) {
          this.finish(job);
          this.lose(job, false); // once, even when an extension found it lost first
          break;
        }
        if (this.queue.connector.isClosed) return this.finish(job);
        this.emit('error', err);
        await new Promise((r) => setTimeout(r, 100)); // keep the lease alive and try again
      }
    }
    this.refill();
  }

  private finish(job: Running<D>): void {
    if (this.held.get(job.id) === job) this.held.delete(job.id);
    if (this.held.size === 0 && this.extendTimer) {
      clearInterval(this.extendTimer);
      this.extendTimer = undefined;
    }
    this.settle();
  }

  /** A slot freed outside an ack (a failure): claim for it on the next tick, with the acks. */
  private refill(): void {
    if (this.closing || this.free <= 0) return;
    if (this.short) {
      this.watchForWork();
      return;
    }
    if (!this.ackScheduled) {
      this.ackScheduled = true;
      process.nextTick(() => void this.claimFree());
    }
  }

  /**
   * The queue was short and the loop sleeps because every slot was busy: now that a slot is
   * free, move the loop to a blocking read on the wake stream so new work is seen at once.
   */
  private watchForWork(): void {
    if (this.parked === 'sleep' && this.short && this.free > 0) this.wakeLoop();
  }

  private async claimFree(): Promise<void> {
    if (this.acks.length > 0) return this.flushAcks();
    this.ackScheduled = false;
    try {
      await this.drain();
    } catch (err) {
      this.emit('error', err); // the beat will claim again
    }
    this.settle();
  }

  // ── leases ──────────────────────────────────────────────────────────────────

  /** One extend_lock call for every held job; aborts the ones cancelled or lost. */
  private async extend(): Promise<void> {
    const jobs = [...this.held.values()].filter((j) => !j.released);
    if (jobs.length === 0) return;
    if (this.logging.size > 0) this.sendLogs(); // a long job's lines show up once a period
    const argv: (string | number)[] = [this.queue.keys.prefix, this.leaseMs];
    for (const j of jobs) argv.push(j.id, j.token);
    try {
      const statuses = (await this.queue.run('extend_lock', argv)) as string[];
      for (const [i, job] of jobs.entries()) this.onLease(job, statuses[i]!);
    } catch (err) {
      this.emit('error', err);
    }
  }

  private onLease(job: Running<D>, status: string): void {
    if (status === 'cancel') job.abort('cancelled');
    // An acknowledgement may have landed just before this extension: its own reply tells.
    else if (status === 'lost' && !job.acking) this.lose(job, false);
  }

  /**
   * The job's lease is gone (recovered elsewhere): abort its handler and never send its
   * outcome. `orphan`: the job was claimed again by this consumer, so the old handler keeps
   * its slot counted until it returns.
   */
  private lose(job: Running<D>, orphan: boolean): void {
    if (job.released) return;
    job.released = true;
    if (orphan) {
      job.orphaned = true;
      this.orphans += 1;
    }
    job.abort('lost');
    this.emit('lost', job);
  }

  /** ctx.checkpoint(): extends this job's lease now; throws when cancelled or lost. */
  async checkpoint(job: Running<D>): Promise<void> {
    if (this.logging.size > 0) this.sendLogs();
    if (!job.aborted) {
      const [status] = (await this.queue.run('extend_lock', [
        this.queue.keys.prefix,
        this.leaseMs,
        job.id,
        job.token,
      ])) as string[];
      this.onLease(job, status!);
    }
    if (job.aborted) throw job.reason();
  }

  /** ctx.log(): buffers a line (cut to maxLogLineBytes), keeping the newest maxLogLines. */
  log(job: Running<D>, line: string): void {
    const text = logLine(line, this.maxLogLineBytes);
    if (job.released) return;
    const lines = job.logLines ?? [];
    job.logLines = lines;
    lines.push(text);
    if (lines.length > this.maxLogLines) lines.shift();
    this.logging.add(job);
  }

  /**
   * Sends every buffered log line in one `log` call. Not awaited: the call is written before the
   * acknowledgement or checkpoint that follows it on the same connection, so Redis runs it
   * first and no round trip is added. Lines of a call that failed go back to their buffers.
   */
  private sendLogs(): void {
    const sent: [Running<D>, string[]][] = [];
    const argv: (string | number)[] = [this.queue.keys.prefix, this.maxLogLines];
    for (const job of this.logging) {
      const lines = job.logLines ?? [];
      job.logLines = undefined;
      sent.push([job, lines]);
      argv.push(job.id, job.token, lines.length, ...lines);
    }
    this.logging.clear();
    this.queue.run('log', argv).catch((err) => {
      this.emit('error', err);
      for (const [job, lines] of sent) {
        if (job.released || this.held.get(job.id) !== job) continue;
        job.logLines = [...lines, ...(job.logLines ?? [])].slice(-this.maxLogLines);
        this.logging.add(job);
      }
    });
  }

  /** ctx.progress(): stores progress on the row (fenced by the lease token). */
  async progress(job: Running<D>, value: number | object): Promise<void> {
    const encoded = encodeJson(value, 'progress', this.queue.maxPayloadBytes);
    await this.queue.run('progress', [job.id, job.token, encoded], job.id);
  }

  // ── observing and closing ───────────────────────────────────────────────────

  private settle(): void {
    if (this.held.size === 0 && this.acks.length === 0 && this.reserved === 0) {
      for (const w of this.settledWaiters.splice(0)) w();
      // Work held back by a rate window is not idleness: the consumer claims it when it reopens.
      const waiting = this.limitedUntil !== Number.POSITIVE_INFINITY;
      const rechecked = this.beatRechecks === this.rechecks;
      if ((this.short && !waiting && rechecked) || this.closing)
        for (const w of this.idleWaiters.splice(0)) w();
    }
  }

  /**
   * Resolves when nothing is running and the last claim found nothing claimable, and no rate
   * limit holds jobs back (a paused queue or lane counts as idle); after recheck(), once a beat
   * begun after it has run.
   */
  idle(): Promise<void> {
    return new Promise((resolve) => {
      this.idleWaiters.push(resolve);
      this.settle();
    });
  }

  /**
   * Stops claiming, waits up to `timeoutMs` (default 10 s) for running handlers, then hands
   * every unfinished job back to pending at once (no attempt spent, no lease to wait out) and
   * aborts its signal. Resolves when the consumer's own connection is closed.
   */
  close(opts: { timeoutMs?: number } = {}): Promise<void> {
    this.closed ??= this.shutdown(opts.timeoutMs ?? 10_000);
    return this.closed;
  }

  private async shutdown(timeoutMs: number): Promise<void> {
    this.closing = true;
    this.unwatchClock?.();
    this.wakeLoop();
    // Closing the blocking connection ends a blocking XREAD at once (closed once: a second
    // disconnect of an ioredis client leaves a 2 s timer holding the process open).
    if (this.blocking) this.queue.connector.release(this.blocking);
    this.blocking = undefined;
    await this.loopDone;
    if (this.held.size > 0 || this.acks.length > 0 || this.reserved > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((resolve) => {
          this.settledWaiters.push(resolve);
          this.settle();
        }),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, timeoutMs);
        }),
      ]);
      clearTimeout(timer);
    }
    const unfinished = [...this.held.values()].filter(
      (j) => !j.released && !this.acks.some(([a]) => a === j),
    );
    if (unfinished.length > 0 && !this.queue.connector.isClosed) {
      if (this.logging.size > 0) this.sendLogs();
      for (const j of unfinished) j.released = true;
      const argv: (string | number)[] = [this.queue.keys.prefix];
      for (const j of unfinished) argv.push(j.id, j.token);
      try {
        await this.queue.run('handback', argv);
      } catch (err) {
        this.emit('error', err); // their leases expire and recovery returns them instead
      }
      for (const j of unfinished) {
        j.abort('closing');
        this.finish(j);
      }
    }
    if (this.extendTimer) clearInterval(this.extendTimer);
    this.extendTimer = undefined;
    await this.leave();
    this.detach?.();
    for (const w of this.idleWaiters.splice(0)) w();
    this.emit('closed');
  }

  /** The last heartbeat: tools stop listing this consumer at once (not after it goes stale). */
  private async leave(): Promise<void> {
    if (this.queue.connector.isClosed) return;
    try {
      await this.queue.run('heartbeat', [this.queue.keys.prefix, this.id, '']);
    } catch (err) {
      this.emit('error', err); // it is shown as dead once its beats are stale
    }
  }
}

/**
 * A claimed job's payload and backoff as the handler and the failure path use them (SPEC 5.1):
 * a payload that is not JSON, or a backoff that is not a policy, is bad data — `bad` is the
 * error that dead-letters the job (it can never run as stored).
 */
function decodeClaimed(
  id: string,
  payload: unknown,
  backoff: unknown,
): { data: unknown; backoff: BackoffPolicy | undefined; bad?: UnrecoverableError } {
  let data: unknown;
  try {
    data = JSON.parse(String(payload));
  } catch (err) {
    return { data: undefined, backoff: undefined, bad: badData(id, 'payload', err) };
  }
  if (typeof backoff !== 'string' || backoff === '') return { data, backoff: undefined };
  try {
    return { data, backoff: Backoff.validate(JSON.parse(backoff)) };
  } catch (err) {
    return { data, backoff: undefined, bad: badData(id, 'backoff', err) };
  }
}

function badData(id: string, field: 'payload' | 'backoff', cause: unknown): UnrecoverableError {
  const why = cause instanceof Error ? cause.message : showValue(cause);
  const fix =
    field === 'payload' ? 'enqueue its data as JSON' : 'fix the field (or remove it) and retry the job';
  return new UnrecoverableError(
    `EMQDATA job ${id} has a ${field} this consumer cannot use (${why}); it was dead-lettered: ${fix}`,
    { cause },
  );
}

function clip(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text) <= maxBytes) return text;
  return `${Buffer.from(text).subarray(0, maxBytes).toString('utf8')}…`;
}
