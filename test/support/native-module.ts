// The native module (module/) for the tests that load it: built with `make -C module` when a C
// compiler and make are on the machine (incremental, a second or two), else the tests that need
// it are skipped, saying why. A build that fails with a compiler present fails the tests.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './run-process.js';

export const MODULE_PATH = join(ROOT, 'module', 'build', 'echomq.so');

function has(tool: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status === 0;
}

function locate(): { path: string; missing?: undefined } | { path?: undefined; missing: string } {
  if (has('make') && (has('cc') || has('gcc'))) {
    execFileSync('make', ['-s', '-C', join(ROOT, 'module')], { stdio: ['ignore', 'ignore', 'inherit'] });
    return { path: MODULE_PATH };
  }
  if (existsSync(MODULE_PATH)) return { path: MODULE_PATH };
  return {
    missing:
      'SKIPPED: no C compiler or make to build module/ (install them with apt-get install -y gcc make, ' +
      'then npm run build:module)',
  };
}

/** The module's path, or why it is not there. Built once per test process. */
export const nativeModule = locate();

/**
 * redis-server arguments that load the module. Its timers release due jobs on their own (SPEC
 * 26.1), so the tests that replay a queue state against one call load it with `timers: 'off'`
 * (the default here): a timer firing between the state and the call would take the call's work.
 */
export function loadModuleArgs(opts: { timers?: 'on' | 'off' } = {}): string[] {
  return nativeModule.path ? ['--loadmodule', nativeModule.path, 'timers', opts.timers ?? 'off'] : [];
}
