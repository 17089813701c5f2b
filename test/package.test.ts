// The package as an installer sees it: the `echomq` bin and every subpath of package.json's
// exports point at files of the build (npm run build), and each subpath exports what the
// README shows it exporting. Moving a source file must not move an entry point.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from './support/run-process.js';

interface Manifest {
  bin: Record<string, string>;
  exports: Record<string, string | { types: string; import: string }>;
}

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Manifest;

describe('package entry points', () => {
  it('the bin and every exports target are files of the build', () => {
    const targets = [
      ...Object.values(pkg.bin),
      ...Object.values(pkg.exports).flatMap((t) => (typeof t === 'string' ? [t] : [t.types, t.import])),
    ];
    const missing = targets.filter((t) => !existsSync(join(ROOT, t)));
    expect(missing, 'missing after npm run build').toEqual([]);
    expect(Object.keys(pkg.bin)).toEqual(['echomq']);
  });

  it.each([
    ['echomq/cli', ['CliError', 'EXIT', 'buildProgram', 'main']],
    ['echomq/dashboard', ['dashboardHandler', 'startDashboard']],
    ['echomq/metrics', ['registerMetrics', 'streamMs']],
    ['echomq/tracing', ['TracedQueue', 'formatTraceContext', 'parseTraceContext', 'withTracing']],
    ['echomq/testing', ['enqueued', 'runUntilIdle']],
  ])('%s exports %j', async (subpath, names) => {
    const mod = (await import(subpath)) as Record<string, unknown>;
    for (const name of names) expect(typeof mod[name], `${subpath} ${name}`).not.toBe('undefined');
  });
});
