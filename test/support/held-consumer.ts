// A consumer in a child process (test/support/consumer-process.ts) that holds every job it
// starts until it is SIGKILLed: for the tests of what recovers a dead holder's leases.
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from './run-process.js';
import { within } from './wait.js';

/** Starts the holder on `queue` (lease `leaseMs`, `n` slots) and resolves once it started `n` jobs. */
export async function holdJobs(
  url: string,
  queue: string,
  leaseMs: number,
  n: number,
): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(ROOT, 'test/support/consumer-process.ts'),
      url,
      queue,
      String(leaseMs),
      String(n),
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  const started = new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (d) => {
      out += d;
      if ((out.match(/started /g) ?? []).length >= n) resolve();
    });
    child.once('exit', (code) => reject(new Error(`consumer process exited (${code})`)));
  });
  try {
    await within(started, 20_000, `the child consumer to start ${n} jobs`);
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  return child;
}

/** SIGKILLs the holder and resolves once it is gone: its leases are then final. */
export function killHolder(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}
