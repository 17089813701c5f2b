// This very Node process's instructions, when it runs under callgrind (bench/node-cost.ts,
// bench/client-cost.ts): zero the counters before the measured part, dump them after it.
//   VG=<dir> valgrind --tool=callgrind --callgrind-out-file=<dir>/cg.out --smc-check=all-non-file \
//     --separate-threads=yes node --import tsx bench/<bench>.ts ...
// --separate-threads=yes gives the main thread (the JS, the event loop) a figure of its own;
// V8's background threads (TurboFan compiling, GC helpers) are the rest.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/** callgrind_control on this very process: spawned, not run synchronously (valgrind must keep running us). */
export const control = (flag: string): Promise<void> =>
  new Promise<void>((res, rej) => {
    const p = spawn('callgrind_control', [flag, String(process.pid)], { stdio: 'ignore' });
    p.on('exit', () => res());
    p.on('error', rej);
  });

/** Zeroes this process's counters (the start of a measured part). */
export const zeroInstructions = (): Promise<void> => control('-z');

/**
 * Instructions since the last zeroing, from a dump into `dir` (valgrind's --callgrind-out-file
 * directory): every thread's, and the main thread's (the file ending in -01).
 */
export async function instructions(dir: string): Promise<{ all: number; main?: number }> {
  await control('-d');
  const seq = (f: string) => Number(f.split('.')[2]!.split('-')[0]);
  const files = readdirSync(dir).filter((f) => /^cg\.out\.\d+/.test(f));
  const last = Math.max(...files.map(seq));
  let all = 0;
  let main: number | undefined;
  for (const f of files.filter((f) => seq(f) === last)) {
    let sum = 0;
    for (const m of readFileSync(`${dir}/${f}`, 'utf8').matchAll(/^(?:summary|totals): (\d+)/gm))
      sum = Math.max(sum, Number(m[1]));
    all += sum;
    if (f.endsWith('-01')) main = sum;
  }
  return { all, main };
}
