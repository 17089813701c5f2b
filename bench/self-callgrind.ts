// This very Node process's instructions, when it runs under callgrind (bench/node-cost.ts,
// bench/client-cost.ts): zero the counters before the measured part, dump them after it.
//   VG=<dir> valgrind --tool=callgrind --callgrind-out-file=<dir>/cg.out --smc-check=all-non-file \
//     --separate-threads=yes node --import tsx bench/<bench>.ts ...
// --separate-threads=yes gives the main thread (the JS, the event loop) a figure of its own;
// V8's background threads (TurboFan compiling, GC helpers) are the rest.
import { spawn } from 'node:child_process';
import { closeSync, fstatSync, openSync, readdirSync, readSync } from 'node:fs';

/** callgrind_control on this very process: spawned, not run synchronously (valgrind must keep running us). */
const control = (flag: string): Promise<void> =>
  new Promise<void>((res, rej) => {
    const p = spawn('callgrind_control', [flag, String(process.pid)], { stdio: 'ignore' });
    p.on('exit', () => res());
    p.on('error', rej);
  });

/** Dumps this process asked for: valgrind numbers its dump files 1, 2, ... in that order. */
let dumps = 0;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A dump file's last bytes, where callgrind writes its `totals:` line. */
function tail(file: string): string {
  const fd = openSync(file, 'r');
  try {
    const size = fstatSync(fd).size;
    const buf = Buffer.alloc(Math.min(size, 4096));
    readSync(fd, buf, 0, buf.length, size - buf.length);
    return buf.toString('latin1');
  } finally {
    closeSync(fd);
  }
}

/**
 * Dumps the counters into `dir` (valgrind's --callgrind-out-file directory) and sums that dump:
 * every thread's instructions since the last dump, and the main thread's (the file ending in -01).
 * A dump also zeroes the counters. Valgrind takes the request when this process next runs, which
 * may be after callgrind_control has given up waiting (the main thread asleep in epoll): the
 * dump's files are waited for, with timers that wake the process, until all are written. Only
 * each file's tail is read: what that costs lands in the next part measured, and reading a whole
 * dump (megabytes after a long part) would weigh on it by its size.
 */
async function dump(dir: string): Promise<{ all: number; main?: number }> {
  const seq = ++dumps;
  await control('-d');
  const prefix = `cg.out.${seq}-`;
  const mine = (f: string) => f.startsWith(prefix) && /^\d+$/.test(f.slice(prefix.length));
  let seen = -1;
  for (let waited = 0; ; waited += 50) {
    const files = readdirSync(dir).filter(mine);
    const totals = files.map((f) => /^totals: (\d+)/m.exec(tail(`${dir}/${f}`)));
    // Each file ends with its totals line; the set is complete once it stops growing.
    if (files.length > 0 && files.length === seen && totals.every((t) => t !== null)) {
      let all = 0;
      let main: number | undefined;
      files.forEach((f, i) => {
        const n = Number(totals[i]![1]);
        all += n;
        if (f.endsWith('-01')) main = n;
      });
      return { all, main };
    }
    if (waited > 120_000) throw new Error(`callgrind dump ${seq} did not appear in ${dir}`);
    seen = files.length;
    await sleep(50);
  }
}

/** Zeroes this process's counters (the start of a measured part): a dump whose figures are dropped. */
export const zeroInstructions = async (dir: string): Promise<void> => void (await dump(dir));

/** Instructions since the last zeroing (or dump): every thread's, and the main thread's. */
export const instructions = dump;

/** A few dumps whose figures are dropped, so the dump code is compiled before a measured part. */
export async function warmDumps(dir: string): Promise<void> {
  for (let i = 0; i < 3; i++) await dump(dir);
}
