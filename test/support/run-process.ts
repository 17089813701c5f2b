// Runs a script of this repository as a child process to its end, output piped (so not a TTY),
// for the tests that check what examples, the README's programs and the benchmark print.
import { spawn } from 'node:child_process';
import { join } from 'node:path';

/** The repository root, where child processes run. */
export const ROOT = join(import.meta.dirname, '..', '..');

export interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `command args` from the repository root (or `cwd`); SIGKILLed once `timeoutMs` have
 * passed. Its stdin gets `input` (default none) and is then closed.
 */
export function runProcess(
  command: string,
  args: string[],
  timeoutMs: number,
  env: NodeJS.ProcessEnv = process.env,
  input?: string,
  cwd: string = ROOT,
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
    child.stdin.on('error', () => {}); // a child that exits without reading: EPIPE is no failure
    child.stdin.end(input ?? ''); // no input: stdin at its end at once, as /dev/null would be
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** Runs a TypeScript file of the repository under tsx, as `npm start` would. */
export function runTs(file: string, env: NodeJS.ProcessEnv, timeoutMs = 20_000): Promise<Run> {
  return runProcess(process.execPath, ['--import', 'tsx', file], timeoutMs, env);
}
