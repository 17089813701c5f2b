// Execution timeouts (SPEC 8.1): one timer for every held job that has a deadline, armed for
// the earliest of them, never a timer per job. A job without a timeout (the job's own
// timeoutMs, else the consumer's) is never added, so a consumer with no timeouts pays nothing.

/** A job a deadline can be set on: `deadlineAt` is local performance.now() ms. */
export interface Timed {
  deadlineAt?: number;
}

export class Deadlines<J extends Timed> {
  private readonly jobs = new Set<J>();
  private timer: NodeJS.Timeout | undefined;
  /** When the timer fires (local ms); +Infinity while none is armed. */
  private timerAt = Number.POSITIVE_INFINITY;

  /** `expire` is called once per job whose deadline came while it was still held. */
  constructor(private readonly expire: (job: J) => void) {}

  /** Jobs with a deadline held now. */
  get size(): number {
    return this.jobs.size;
  }

  /** Starts `job`'s clock: it expires `ms` from now unless removed before. */
  add(job: J, ms: number): void {
    job.deadlineAt = performance.now() + ms;
    this.jobs.add(job);
    this.arm(job.deadlineAt);
  }

  /** The job left (finished, failed, handed back, lost): its deadline no longer applies. */
  remove(job: J): void {
    if (!this.jobs.delete(job)) return;
    if (this.jobs.size === 0) this.stop();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
  }

  private arm(at: number): void {
    if (at >= this.timerAt) return; // the armed timer comes first, and re-arms for the rest
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => this.fire(), Math.max(0, at - performance.now()));
  }

  private fire(): void {
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
    const now = performance.now();
    let next = Number.POSITIVE_INFINITY;
    const due: J[] = [];
    for (const job of this.jobs) {
      const at = job.deadlineAt ?? Number.POSITIVE_INFINITY;
      if (at <= now) due.push(job);
      else if (at < next) next = at;
    }
    for (const job of due) {
      this.jobs.delete(job);
      this.expire(job);
    }
    if (next !== Number.POSITIVE_INFINITY) this.arm(next);
  }
}
