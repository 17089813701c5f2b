// The package as an installer sees it: the `echomq` bin and every subpath of package.json's exports
// point at files of the build (npm run build), and each subpath exports what the documentation
// shows it exporting (docs/reference/api.md). Moving a source file must not move an entry point.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../support/run-process.js';

interface Manifest {
  bin: Record<string, string>;
  exports: Record<string, string | { types: string; import: string; require?: string }>;
}

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Manifest;

describe('package entry points', () => {
  it('the bin and every exports target are files of the package', () => {
    const targets = [
      ...Object.values(pkg.bin),
      ...Object.values(pkg.exports).flatMap((t) =>
        typeof t === 'string' ? [t] : [t.types, t.import, ...(t.require ? [t.require] : [])],
      ),
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

describe('the newcomer path', () => {
  it('a clone builds as it installs (prepare), so import and npx echomq work after npm ci', () => {
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
      type: string;
    };
    expect(manifest.scripts.prepare).toBe('npm run build');
    expect(manifest.type).toBe('module');
  });

  it('is ESM only, and CommonJS loads it with the dynamic import the README shows', async () => {
    const { runProcess } = await import('../support/run-process.js');
    const cjs = [
      "let required = 'loaded';",
      "try { require('echomq'); } catch (e) { required = e.message; }",
      "import('echomq').then((m) => console.log(JSON.stringify([required, typeof m.EchoMQ.connect])));",
    ].join('\n');
    const run = await runProcess(process.execPath, ['--input-type=commonjs', '-e', cjs], 30_000);
    expect(run.stderr).toBe('');
    const [required, connect] = JSON.parse(run.stdout) as [string, string];
    // require() finds an error that says what to do; the import works.
    expect(required).toContain('ES module (ESM only)');
    expect(required).toContain("await import('echomq')");
    expect(connect).toBe('function');
  });

  it('the bin runs from the build: echomq --help', async () => {
    const { runProcess } = await import('../support/run-process.js');
    const run = await runProcess(process.execPath, [join(ROOT, pkg.bin.echomq!), '--help'], 30_000);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('Usage: echomq');
  });
});
