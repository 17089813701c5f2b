// A redis-server whose wall clock the test steps: test/support/clock-shim.c, built here with the
// machine's C compiler into a temp dir and LD_PRELOADed; its offset lives in a file the server
// maps, so `step` takes effect at the server's next clock reading. Without a compiler the tests
// that need it are skipped, saying why.
import { execFileSync, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

function build(): { path: string; missing?: undefined } | { path?: undefined; missing: string } {
  const cc = ['cc', 'gcc'].find(
    (t) => spawnSync('sh', ['-c', `command -v ${t}`], { stdio: 'ignore' }).status === 0,
  );
  if (!cc) return { missing: 'SKIPPED: no C compiler to build the clock shim (apt-get install -y gcc)' };
  const dir = mkdtempSync(join(tmpdir(), 'echomq-clock-'));
  const path = join(dir, 'clock-shim.so');
  execFileSync(cc, [
    '-O2',
    '-shared',
    '-fPIC',
    '-o',
    path,
    join(import.meta.dirname, 'clock-shim.c'),
    '-ldl',
  ]);
  return { path };
}

export const clockShim = build();

/** The offset file of one server and the redis-server environment that loads the shim. */
export class ServerClock {
  readonly file: string;
  private offsetMs = 0;

  constructor() {
    this.file = join(mkdtempSync(join(tmpdir(), 'echomq-offset-')), 'offset');
    this.write('w');
  }

  get env(): Record<string, string> {
    return { LD_PRELOAD: clockShim.path ?? '', ECHOMQ_CLOCK_FILE: this.file };
  }

  /** Steps the server's wall clock by `ms` (negative: back). */
  step(ms: number): void {
    this.offsetMs += ms;
    this.write('r+');
  }

  /** 'r+' rewrites the eight bytes in place: a truncation would SIGBUS a server reading the map. */
  private write(flags: 'w' | 'r+'): void {
    const b = Buffer.alloc(8);
    b.writeBigInt64LE(BigInt(this.offsetMs));
    const fd = openSync(this.file, flags);
    writeSync(fd, b, 0, 8, 0);
    closeSync(fd);
  }
}
