// The Go runtime for the cross-runtime tests: whether Go is here, building runtimes/go's emq-go
// binary once per describe, running its commands, and `emq-go consume` as a child process whose
// JSON lines the test reads. Without Go (Debian's golang-go and golang-github-gomodule-redigo-dev)
// `haveGo` is false and the describes that need it skip, saying so.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll } from 'vitest';
import { ROOT, runProcess } from '../support/run-process.js';
import { deferred, within } from '../support/wait.js';

export const GO_DIR = join(ROOT, 'runtimes', 'go');
const goVersion = spawnSync('go', ['version'], { encoding: 'utf8' });
const redigo = spawnSync('test', ['-d', '/usr/share/gocode/src/github.com/gomodule/redigo/redis']);
export const haveGo = goVersion.status === 0 && redigo.status === 0;
if (!haveGo) {
  console.warn(
    'cross-runtime tests skipped: Go is not installed (apt-get install golang-go golang-github-gomodule-redigo-dev)',
  );
}
export const GO_ENV = { ...process.env, GOFLAGS: '-mod=vendor', GOPROXY: 'off' };

export interface GoLine {
  kind: string;
  id?: string;
  attempt?: number;
  outcome?: string;
  at?: number;
}

/** A running consumer of another runtime (emq-go, EchoMQ.CLI): its JSON lines; close() ends it gracefully. */
export class LineConsumer {
  readonly lines: GoLine[] = [];
  readonly ready = deferred();
  private readonly exited = deferred<number | null>();
  private readonly child: ChildProcess;

  constructor(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv) {
    this.child = spawn(command, args, { cwd, env, stdio: ['pipe', 'pipe', 'inherit'] });
    createInterface({ input: this.child.stdout! }).on('line', (text) => {
      if (!text.startsWith('{')) return; // a runtime's own log line, not one of the test's
      const line = JSON.parse(text) as GoLine;
      this.lines.push(line);
      if (line.kind === 'ready') this.ready.resolve();
    });
    this.child.on('close', (code) => this.exited.resolve(code));
  }

  of(kind: string): GoLine[] {
    return this.lines.filter((l) => l.kind === kind);
  }

  /** Closes its stdin: the consumer closes (handing back what runs) and exits. */
  async close(): Promise<number | null> {
    this.child.stdin!.end();
    return within(this.exited.promise, 30_000, 'the consumer to exit');
  }

  /** SIGKILL: no hand-back, its leases left to run out. */
  kill(): Promise<number | null> {
    this.child.kill('SIGKILL');
    return within(this.exited.promise, 10_000, 'the killed consumer to exit');
  }
}

/** A running `emq-go consume` (beat 200 ms) of `queue` at `concurrency`. */
export class GoConsumer extends LineConsumer {
  constructor(bin: string, url: string, queue: string, concurrency: number, extra: string[] = []) {
    super(
      bin,
      [
        'consume',
        '--url',
        url,
        '--queue',
        queue,
        '--concurrency',
        String(concurrency),
        '--beat-ms',
        '200',
        ...extra,
      ],
      GO_DIR,
      GO_ENV,
    );
  }
}

/**
 * Builds emq-go into a temp dir before the tests of the describe it is called in (none when
 * that describe is skipped), and removes it after; `bin` is its path.
 */
export function useGoBuild(): { readonly bin: string } {
  const build = { bin: '', dir: '' };
  beforeAll(async () => {
    build.dir = mkdtempSync(join(tmpdir(), 'emq-go-'));
    build.bin = join(build.dir, 'emq-go');
    const vendor = await runProcess('bash', [join(GO_DIR, 'vendor.sh')], 30_000);
    if (vendor.code !== 0) throw new Error(`runtimes/go/vendor.sh failed: ${vendor.stderr}`);
    const made = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn('go', ['build', '-o', build.bin, './cmd/emq-go'], { cwd: GO_DIR, env: GO_ENV });
      let stderr = '';
      child.stderr.on('data', (d) => {
        stderr += d;
      });
      child.on('close', (code) => resolve({ code, stderr }));
    });
    if (made.code !== 0) throw new Error(`go build failed: ${made.stderr}`);
  }, 180_000);
  afterAll(() => {
    if (build.dir) rmSync(build.dir, { recursive: true, force: true });
  });
  return build;
}

/** Runs an emq-go command (the binary `bin`) to its end and returns its stdout; throws when it fails. */
export async function goRun(bin: string, args: string[], input?: string): Promise<string> {
  const run = await runProcess(bin, args, 60_000, GO_ENV, input);
  if (run.code !== 0) throw new Error(`emq-go ${args[0]} exited ${run.code}: ${run.stderr}`);
  return run.stdout;
}
