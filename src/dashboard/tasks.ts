// The dashboard's long actions (retry all, clean, drain): each runs in this process batch by
// batch after its POST has been answered, and reports its progress, so a page shows "retried
// 40,000 of 200,000" instead of one request blocking for seconds without a word. A task lives
// in memory only: a dashboard that restarts forgets its tasks (the verbs' effects stay), and a
// dashboard behind a load balancer answers for the tasks it runs itself.

import { randomBytes } from 'node:crypto';

export interface TaskView {
  id: string;
  queue: string;
  /** What runs, as the page says it: 'retry dead jobs named charge'. */
  label: string;
  state: 'running' | 'done' | 'failed';
  /** Jobs handled so far. */
  done: number;
  /** Jobs to handle in all, when known at the start. */
  total: number | null;
  /** The verb's result once done; its error message once failed. */
  result?: unknown;
  error?: string;
  /** Epoch ms (this process's clock). */
  startedAt: number;
  endedAt?: number;
}

/** Tasks kept in all: the oldest ended ones go first. */
const MAX_TASKS = 100;
/** How long an ended task stays readable. */
const KEEP_ENDED_MS = 10 * 60_000;

export class Tasks {
  private readonly all = new Map<string, TaskView>();

  /**
   * Starts `run` and returns its task at once. `run` reports progress (done, total) after each
   * batch; its resolved value is the task's result.
   */
  start(
    queue: string,
    label: string,
    run: (progress: (done: number, total: number | null) => void) => Promise<unknown>,
  ): TaskView {
    this.prune();
    const task: TaskView = {
      id: randomBytes(8).toString('hex'),
      queue,
      label,
      state: 'running',
      done: 0,
      total: null,
      startedAt: Date.now(),
    };
    this.all.set(task.id, task);
    const progress = (done: number, total: number | null) => {
      task.done = done;
      task.total = total;
    };
    run(progress).then(
      (result) => {
        task.state = 'done';
        task.result = result ?? null;
        if (typeof result === 'number') task.done = result;
        task.endedAt = Date.now();
      },
      (err: unknown) => {
        task.state = 'failed';
        task.error = err instanceof Error ? err.message : String(err);
        task.endedAt = Date.now();
      },
    );
    return task;
  }

  get(id: string): TaskView | undefined {
    return this.all.get(id);
  }

  /** A queue's running tasks and those that ended in the last 10 minutes, newest first. */
  of(queue: string): TaskView[] {
    this.prune();
    return [...this.all.values()].filter((t) => t.queue === queue).reverse();
  }

  private prune(): void {
    const now = Date.now();
    for (const [id, t] of this.all)
      if (t.endedAt !== undefined && now - t.endedAt > KEEP_ENDED_MS) this.all.delete(id);
    for (const [id, t] of this.all) {
      if (this.all.size < MAX_TASKS) break;
      if (t.state !== 'running') this.all.delete(id);
    }
  }
}
