// The chaos suite's local records: one append-only file per process, one tab-separated line per
// record, written with a synchronous write(2) before the process goes on. A SIGKILL of the
// process loses nothing written (the kernel holds it), and a Redis crash cannot touch it: these
// files are the ground truth the harness checks Redis against.
import { closeSync, existsSync, openSync, readFileSync, writeSync } from 'node:fs';

/**
 * Consumer records: `t ev job attempt seq group extra`
 *   ready   the consumer is running (job, attempt, seq empty)
 *   start   a handler began (seq: this process's execution number)
 *   slow    this execution blocks its event loop for `extra` ms (outlives its lease)
 *   end     the handler returned; extra: the signal's abort code ('' when not aborted)
 *   ok      the consumer's complete call stored this execution's result
 *   lost    the consumer was told the lease was gone (EMQLEASE): the result was refused
 * Producer records: `t ev job kind group`
 *   sent    about to enqueue (the job may or may not be stored)
 *   ack     the enqueue call replied: the producer was told the job is stored
 *   done    every planned job was acknowledged (or given up on)
 */
export interface Rec {
  t: number;
  ev: string;
  job: string;
  a: string;
  b: string;
  c: string;
  d: string;
}

export interface RecordFile {
  write(ev: string, job?: string, a?: string | number, b?: string | number, c?: string, d?: string): void;
  close(): void;
}

export function openRecords(path: string): RecordFile {
  const fd = openSync(path, 'a');
  return {
    write(ev, job = '', a = '', b = '', c = '', d = '') {
      writeSync(fd, `${Date.now()}\t${ev}\t${job}\t${a}\t${b}\t${c}\t${d}\n`);
    },
    close() {
      closeSync(fd);
    },
  };
}

/** Every complete line of the file (a line cut short by a SIGKILL is skipped). */
export function readRecords(path: string): Rec[] {
  if (!existsSync(path)) return [];
  const out: Rec[] = [];
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    const f = line.split('\t');
    if (f.length < 7) continue;
    out.push({ t: Number(f[0]), ev: f[1]!, job: f[2]!, a: f[3]!, b: f[4]!, c: f[5]!, d: f[6]! });
  }
  return out;
}

/** The payload every chaos job carries. */
export interface ChaosData {
  /** kind: flat | group | delayed | repeat | sched */
  k: string;
  /** The lane, for grouped jobs. */
  g?: string;
  /** How long the handler works, ms. */
  ms: number;
}

export const QUEUE = 'chaos';
export const REPEAT_NAME = 'chaos-tick';
export const REPEAT_EVERY_MS = 500;
export const SCHEDULER_ID = 'chaos-sched';
export const SCHEDULER_EVERY_MS = 700;
/** The lanes and their concurrency limits. */
export const LANES: Readonly<Record<string, number>> = { g0: 1, g1: 1, g2: 2, g3: 3 };
