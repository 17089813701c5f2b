// The jobs a consumer holds, each under a lease: one `extend_lock` call per period for all of
// them (it also tells of a cancel request or a lease taken over), losing a job whose lease is
// gone, and the ctx calls a running handler makes (this is the JobControl every Running talks
// to). Log lines are buffered here and ride on the next call of the same connection.

import type { EventEmitter } from 'node:events';
import { encodeJson, parseMaybe } from '../core/codec.js';
import type { ConsumerEvents } from '../core/types.js';
import { updateData } from '../jobs/control.js';
import { logLine } from '../jobs/logs.js';
import type { QueueWire } from '../wire/queue-wire.js';
import * as reads from '../wire/reads.js';
import * as verbs from '../wire/verbs/index.js';
import type { ConsumeSettings } from './options.js';
import type { JobControl, Running } from './running.js';

export class Leases<D> implements JobControl<D> {
  private readonly held = new Map<string, Running<D>>();
  /** Handlers still running for jobs this consumer lost and then claimed again. */
  private orphanCount = 0;
  /** Held jobs with log lines to send. */
  private readonly logging = new Set<Running<D>>();
  private extendTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly queue: QueueWire,
    private readonly settings: ConsumeSettings,
    private readonly events: EventEmitter<ConsumerEvents>,
    /** Called whenever a job leaves (`job`) or an orphan's slot frees: the consumer checks whether it is now idle or settled. */
    private readonly onRelease: (job?: Running<D>) => void,
  ) {}

  /** Jobs held now. */
  get size(): number {
    return this.held.size;
  }

  /** Slots taken by handlers of jobs lost and claimed again (they still run). */
  get orphans(): number {
    return this.orphanCount;
  }

  /**
   * Takes a claimed job in; extending starts with the first held job. The timer outlives a
   * moment with nothing held (extend() stops it when it finds none): at concurrency 1 every job
   * empties the set, and a timer made and cleared per job was a measurable share of its cost.
   */
  hold(job: Running<D>): void {
    const old = this.held.get(job.id);
    if (old) this.lose(old, true); // our own lease expired (an outage) and we claimed it again
    this.held.set(job.id, job);
    this.extendTimer ??= setInterval(() => void this.extend(), this.settings.extendMs);
  }

  /** The job left this consumer (acknowledged, failed, handed back or lost). */
  release(job: Running<D>): void {
    if (this.held.get(job.id) === job) this.held.delete(job.id);
    this.onRelease(job);
  }

  /** An orphaned job's old handler returned: its slot is free again. */
  endOrphan(job: Running<D>): void {
    if (!job.orphaned) return;
    job.orphaned = false;
    this.orphanCount -= 1;
    this.onRelease();
  }

  stopExtending(): void {
    if (this.extendTimer) clearInterval(this.extendTimer);
    this.extendTimer = undefined;
  }

  /** Held jobs still this consumer's to finish, but for those `skip` says are being acknowledged. */
  unfinished(skip: (job: Running<D>) => boolean): Running<D>[] {
    return [...this.held.values()].filter((j) => !j.released && !skip(j));
  }

  /** Returns unfinished jobs to pending in one call (close) and aborts their handlers. */
  async handBack(jobs: Running<D>[]): Promise<void> {
    this.flushLogs();
    for (const j of jobs) j.released = true;
    try {
      await verbs.handback(this.queue, jobs);
    } catch (err) {
      this.events.emit('error', err); // their leases expire and recovery returns them instead
    }
    for (const j of jobs) {
      j.abort('closing');
      this.release(j);
    }
  }

  /** One extend_lock call for every held job; aborts the ones cancelled or lost. */
  private async extend(): Promise<void> {
    if (this.held.size === 0) return this.stopExtending(); // idle for a period: no timer left behind
    const jobs = [...this.held.values()].filter((j) => !j.released);
    if (jobs.length === 0) return;
    this.flushLogs(); // a long job's lines show up once a period
    try {
      const statuses = await verbs.extendLock(this.queue, this.settings.leaseMs, jobs);
      for (const [i, job] of jobs.entries()) this.applyLease(job, statuses[i]!);
    } catch (err) {
      this.events.emit('error', err);
    }
  }

  private applyLease(job: Running<D>, status: string): void {
    if (status === 'cancel') job.abort('cancelled');
    // An acknowledgement may have landed just before this extension: its own reply tells.
    else if (status === 'lost' && !job.acking) this.lose(job, false);
  }

  /**
   * The job's lease is gone (recovered elsewhere): abort its handler and never send its
   * outcome. `orphan`: the job was claimed again by this consumer, so the old handler keeps
   * its slot counted until it returns.
   */
  lose(job: Running<D>, orphan: boolean): void {
    if (job.released) return;
    job.released = true;
    if (orphan) {
      job.orphaned = true;
      this.orphanCount += 1;
    }
    job.abort('lost');
    this.events.emit('lost', job);
  }

  // ── what a running handler asks (JobControl) ────────────────────────────────

  /** ctx.checkpoint(): extends this job's lease now; throws when cancelled or lost. */
  async checkpoint(job: Running<D>): Promise<void> {
    this.flushLogs();
    if (!job.aborted) {
      const [status] = await verbs.extendLock(this.queue, this.settings.leaseMs, [job]);
      this.applyLease(job, status!);
    }
    if (job.aborted) throw job.reason();
  }

  /** ctx.log(): buffers a line (cut to maxLogLineBytes), keeping the newest maxLogLines. */
  log(job: Running<D>, line: string): void {
    const text = logLine(line, this.settings.maxLogLineBytes);
    if (job.released) return;
    const lines = job.logLines ?? [];
    job.logLines = lines;
    lines.push(text);
    if (lines.length > this.settings.maxLogLines) lines.shift();
    this.logging.add(job);
  }

  /**
   * Sends every buffered log line in one `log` call, if any. Not awaited: the call is written
   * before the acknowledgement or checkpoint that follows it on the same connection, so Redis
   * runs it first and no round trip is added. Lines of a call that failed go back to their buffers.
   */
  flushLogs(): void {
    if (this.logging.size === 0) return;
    const max = this.settings.maxLogLines;
    const sent: [Running<D>, string[]][] = [];
    for (const job of this.logging) {
      const lines = job.logLines ?? [];
      job.logLines = undefined;
      sent.push([job, lines]);
    }
    this.logging.clear();
    const entries = sent.map(([job, lines]) => ({ id: job.id, token: job.token, lines }));
    verbs.log(this.queue, max, entries).catch((err) => {
      this.events.emit('error', err);
      for (const [job, lines] of sent) {
        if (job.released || this.held.get(job.id) !== job) continue;
        job.logLines = [...lines, ...(job.logLines ?? [])].slice(-max);
        this.logging.add(job);
      }
    });
  }

  /** ctx.progress(): stores progress on the row (fenced by the lease token). */
  async progress(job: Running<D>, value: number | object): Promise<void> {
    const encoded = encodeJson(value, 'progress', this.queue.limits.maxPayloadBytes);
    await verbs.progress(this.queue, job.id, job.token, encoded);
  }

  /** ctx.update(): replaces the stored data (fenced by the lease token). */
  update(job: Running<D>, data: unknown): Promise<void> {
    return updateData(this.queue, job.id, data, job.token);
  }

  childrenFailures(job: Running<D>): Promise<Record<string, string>> {
    return reads.children(this.queue, job.id, 'failures');
  }

  async childrenResults(job: Running<D>): Promise<Record<string, unknown>> {
    const raw = await reads.children(this.queue, job.id, 'results');
    const out: Record<string, unknown> = {};
    for (const [id, v] of Object.entries(raw)) out[id] = v === '' ? null : parseMaybe(v);
    return out;
  }
}
