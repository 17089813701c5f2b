// Every example of the documentation (README.md and every page of docs/, the guide and the
// reference), as a new user copies it. The repository is packed (`npm pack`, of
// the build `npm test` makes first) and the tarball unpacked into a fresh project of its own, with
// the package's dependencies and the tools the pages tell a user to install (tsx, typescript,
// @types/node, vitest) linked from this repository's node_modules: `npm install <tgz>` would
// fetch them from the registry, which a test must not need. Each fenced ts/js/sh block of a
// page becomes a file of that project (named for its page and line, the name failures give); every ts/js one that is not a fragment is type-checked
// (one tsc run over them all) under `tsc --init`'s settings (strict, exactOptionalPropertyTypes,
// module nodenext), and every block without a marker is run (tsx, node or bash) against a
// throw-away redis-server, each in a database of its own (REDIS_URL), and must exit 0 by itself
// with nothing on stderr.
//
// A block that is not to be run says so in an HTML comment on the line right before its fence:
//   <!-- fragment: why -->         part of a program, or commands for a clone: neither checked nor run
//   <!-- typecheck-only: why -->   a whole program that needs what a test cannot start (a Cluster)
//   <!-- copy: examples/x.ts -->   the file as it is (checked here), run by test/examples/examples.test.ts or
//                                  test/examples/readme.test.ts (or vitest, for examples/*.test.ts): type-checked
//   <!-- file: path -->            a file other blocks use, written at that path: type-checked
//   <!-- needs: path -->           run, with the `file:` block of that path in place
// So a new block without a marker must run, and one that stops running fails here. A `file:`
// block is one file of the one project, so a `needs:` block may use one shown on another page.
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, normalize } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOC_PAGES, readPage } from '../support/docs.js';
import { useRedisServer } from '../support/harness.js';
import { ROOT, type Run, runProcess } from '../support/run-process.js';

// ── the pages' blocks ───────────────────────────────────────────────────────────

type Kind = 'run' | 'needs' | 'fragment' | 'typecheck-only' | 'copy' | 'file';

interface Block {
  /** The page it is on, repository-relative (README.md, docs/guide/jobs.md, …). */
  page: string;
  /** The line of the opening fence (1-based): with the page, how the tests name the block. */
  line: number;
  lang: string;
  body: string;
  kind: Kind;
  /** The marker's text: a reason, or a path (copy, file, needs). */
  note: string;
  /** The file it becomes in the project: the `file:` path, else block-<page>-<line>.<ext>. */
  file: string;
}

const MARKERS = new Set<Kind>(['fragment', 'typecheck-only', 'copy', 'file', 'needs']);
const EXTENSIONS: Record<string, 'ts' | 'mjs' | 'sh'> = {
  ts: 'ts',
  typescript: 'ts',
  js: 'mjs',
  javascript: 'mjs',
  sh: 'sh',
  bash: 'sh',
  shell: 'sh',
};
/** Blocks that show output or text, never code to run. */
const OUTPUT = new Set(['', 'text']);

/** Whatever is wrong with the pages' fences and markers, found while reading them. */
const problems: string[] = [];

/** A page as a file name: docs/guide/jobs.md is docs-guide-jobs. */
const pageStem = (page: string) => page.replace(/\.md$/, '').replaceAll('/', '-');

function readBlocks(page: string): Block[] {
  const lines = readPage(page).split('\n');
  const blocks: Block[] = [];
  const problem = (line: number, what: string) => problems.push(`${page} line ${line}: ${what}`);
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const lang = open[1]!;
    const end = lines.findIndex((l, j) => j > i && /^```\s*$/.test(l));
    if (end < 0) {
      problem(i + 1, 'a fence that is never closed');
      break;
    }
    const line = i + 1;
    const body = `${lines.slice(i + 1, end).join('\n')}\n`;
    const marker = /^<!-- ([a-z-]+): (.+?) -->$/.exec(lines[i - 1] ?? '');
    i = end;
    if (OUTPUT.has(lang)) {
      if (marker) problem(line, `a ${lang || 'plain'} block is output, it takes no marker`);
      continue;
    }
    const ext = EXTENSIONS[lang];
    if (!ext) {
      problem(line, `\`\`\`${lang} is neither code this test knows (ts, js, sh) nor text`);
      continue;
    }
    let kind: Kind = 'run';
    let note = '';
    if (marker) {
      if (!MARKERS.has(marker[1] as Kind)) {
        problem(line, `unknown marker "${marker[1]}" (known: ${[...MARKERS].join(', ')})`);
        continue;
      }
      kind = marker[1] as Kind;
      note = marker[2]!.trim();
    }
    if (ext === 'sh' && kind !== 'run' && kind !== 'fragment') {
      problem(line, `a shell block runs or is a fragment, it cannot be "${kind}"`);
      continue;
    }
    // A JavaScript block whose first line names a .cjs file (`// main.cjs: …`) is CommonJS.
    const named = /^\/\/ [\w.-]+\.(cjs|mjs)\b/.exec(body);
    const file =
      kind === 'file'
        ? normalize(note)
        : `block-${pageStem(page)}-${line}.${ext === 'mjs' && named ? named[1] : ext}`;
    blocks.push({ page, line, lang, body, kind, note, file });
  }
  return blocks;
}

const blocks = DOC_PAGES.flatMap(readBlocks);
/** How a test names a block: its page and line. */
const at = (b: Block) => `${b.page} line ${b.line}`;
const typeChecked = blocks.filter((b) => b.kind !== 'fragment' && !b.file.endsWith('.sh'));
const runnable = blocks.filter((b) => b.kind === 'run' || b.kind === 'needs');

// ── the project a new user makes ────────────────────────────────────────────────

const env = useRedisServer({ args: ['--databases', String(Math.max(16, runnable.length + 1))] });

/** How long one block may run: a guard against a hang on a loaded machine, not a speed check. */
const HANG_GUARD_MS = 120_000;
/** Blocks run at once: each is a node (and tsx) process, on a machine that may have 2 cores. */
const PARALLEL = 2;
/** What the pages tell a user to install besides echomq (ioredis, prom-client are its own dependencies). */
const USER_TOOLS = ['tsx', 'typescript', '@types/node', 'vitest'];
/** A token the dashboard accepts (16+ characters), for blocks that start one. */
const DASHBOARD_TOKEN = 'readme-examples-token-0123456789';

/** tsc --init's settings (TypeScript 5.9), with Node's types and JavaScript checked too. */
const TSCONFIG = {
  compilerOptions: {
    module: 'nodenext',
    target: 'esnext',
    types: ['node'],
    noUncheckedIndexedAccess: true,
    exactOptionalPropertyTypes: true,
    strict: true,
    verbatimModuleSyntax: true,
    isolatedModules: true,
    noUncheckedSideEffectImports: true,
    moduleDetection: 'force',
    skipLibCheck: true,
    allowJs: true,
    checkJs: true,
    noEmit: true,
  },
};

let tmp = '';
let app = '';
let typecheck: Promise<Run> | undefined;

function must(run: Run, what: string): Run {
  if (run.code !== 0)
    throw new Error(`${what} failed (${run.code ?? run.signal}): ${run.stderr}${run.stdout}`);
  return run;
}

/** Links node_modules/<name> of the project to this repository's copy of the package. */
function linkPackage(name: string): void {
  const target = join(app, 'node_modules', name);
  mkdirSync(dirname(target), { recursive: true });
  symlinkSync(realpathSync(join(ROOT, 'node_modules', name)), target, 'dir');
}

/** A bin of the project (node_modules/.bin/<name>), as npm install makes it. */
function linkBin(name: string, target: string): void {
  chmodSync(join(app, 'node_modules', target), 0o755);
  symlinkSync(join('..', target), join(app, 'node_modules', '.bin', name));
}

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'echomq-readme-'));
  app = join(tmp, 'app');
  // The package as npm publishes it; --ignore-scripts: the build is npm test's (pretest), and
  // rebuilding dist/ here would pull it from under the test files running beside this one.
  const packed = must(
    await runProcess('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp], 120_000),
    'npm pack',
  );
  const tarball = join(tmp, (JSON.parse(packed.stdout) as { filename: string }[])[0]!.filename);
  const pkgDir = join(app, 'node_modules', 'echomq');
  mkdirSync(join(app, 'node_modules', '.bin'), { recursive: true });
  mkdirSync(pkgDir);
  must(await runProcess('tar', ['-xzf', tarball, '-C', pkgDir, '--strip-components=1'], 60_000), 'tar');
  const manifest = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
    bin: Record<string, string>;
  };
  for (const name of [...Object.keys(manifest.dependencies), ...USER_TOOLS]) linkPackage(name);
  for (const [name, path] of Object.entries(manifest.bin)) linkBin(name, join('echomq', path));
  linkBin('tsx', join('tsx', 'dist', 'cli.mjs'));
  writeFileSync(
    join(app, 'package.json'),
    `${JSON.stringify({ name: 'my-app', private: true, type: 'module', dependencies: { echomq: `file:${tarball}` } }, null, 2)}\n`,
  );
  writeFileSync(join(app, 'tsconfig.json'), `${JSON.stringify(TSCONFIG, null, 2)}\n`);
  for (const b of blocks) {
    if (b.kind === 'fragment') continue;
    mkdirSync(dirname(join(app, b.file)), { recursive: true });
    writeFileSync(join(app, b.file), b.body);
  }
  // One tsc over every block, started now and awaited by the type-check tests.
  typecheck = runProcess(
    process.execPath,
    [join(app, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', '.', '--pretty', 'false'],
    240_000,
    userEnv(),
    undefined,
    app,
  );
}, 180_000);

afterAll(async () => {
  await typecheck?.catch(() => undefined);
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

/** The environment of a user's shell: none of the test runner's variables. */
function userEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const keep = ['PATH', 'HOME', 'TMPDIR', 'LANG', 'USER'];
  const out: NodeJS.ProcessEnv = {};
  for (const k of keep) if (process.env[k] !== undefined) out[k] = process.env[k];
  return { ...out, ...extra };
}

/** tsc's diagnostics, by the file they are about. */
function diagnostics(output: string): Map<string, string[]> {
  const byFile = new Map<string, string[]>();
  let current: string[] | undefined;
  for (const line of output.split('\n')) {
    const at = /^([^\s(][^(]*)\(\d+,\d+\): /.exec(line);
    if (at) {
      current = byFile.get(at[1]!) ?? [];
      byFile.set(at[1]!, current);
      current.push(line);
    } else if (line.trim() !== '') {
      (current ?? byFile.get('') ?? byFile.set('', []).get('')!).push(line);
    }
  }
  return byFile;
}

// ── a limit on blocks running at once ───────────────────────────────────────────

let running = 0;
const queued: (() => void)[] = [];
async function limited<T>(fn: () => Promise<T>): Promise<T> {
  if (running >= PARALLEL) await new Promise<void>((resolve) => queued.push(resolve));
  running += 1;
  try {
    return await fn();
  } finally {
    running -= 1;
    queued.shift()?.();
  }
}

function runBlock(b: Block, db: number): Promise<Run> {
  const runEnv = userEnv({ REDIS_URL: `${env.server.url}/${db}`, DASHBOARD_TOKEN });
  const path = join(app, b.file);
  const [command, args] = b.file.endsWith('.ts')
    ? [process.execPath, ['--import', 'tsx', path]]
    : b.file.endsWith('.sh')
      ? ['bash', ['-e', '-o', 'pipefail', path]]
      : [process.execPath, [path]];
  return runProcess(command, args, HANG_GUARD_MS, runEnv, undefined, app);
}

// ── the tests ───────────────────────────────────────────────────────────────────

const text = (file: string) => readFileSync(join(ROOT, file), 'utf8');

describe('the fenced blocks of README.md and docs/', () => {
  it('are each code that runs, or marked as what else they are', () => {
    expect(problems).toEqual([]);
    expect(runnable.length).toBeGreaterThan(0);
    expect(new Set(blocks.map((b) => b.page)), 'pages with blocks').toContain('README.md');
    const files = new Set(blocks.filter((b) => b.kind === 'file').map((b) => b.file));
    const shown = blocks.filter((b) => b.kind === 'file').map((b) => b.file);
    expect(shown.length, `a \`file:\` path is shown once: ${shown.join(', ')}`).toBe(files.size);
    const runners = ['test/examples/examples.test.ts', 'test/examples/readme.test.ts'].map(text).join('\n');
    for (const b of blocks) {
      const where = `${at(b)} (${b.kind}: ${b.note})`;
      if (b.kind !== 'run') expect(b.note, `${where} says why or which file`).not.toBe('');
      if (b.kind === 'copy') {
        expect(b.body, `${where} is ${b.note} as it is`).toBe(text(b.note));
        const runs = runners.includes(`'${b.note}'`) || /^examples\/.*\.test\.ts$/.test(b.note);
        expect(runs, `${where}: ${b.note} is run by another test`).toBe(true);
      }
      if (b.kind === 'file') {
        expect(b.file.startsWith('..') || b.file.startsWith('/'), `${where} stays in the project`).toBe(
          false,
        );
        // A file the repository has too is shown as it is (examples/ runs it from the repository).
        let repo: string | undefined;
        try {
          repo = text(b.file);
        } catch {}
        if (repo !== undefined) expect(b.body, `${where} is the repository's ${b.file}`).toBe(repo);
      }
      if (b.kind === 'needs')
        expect(files.has(normalize(b.note)), `${where}: a \`file:\` block shows it`).toBe(true);
    }
  });
});

describe('the examples of README.md and docs/ type-check from the packed package', () => {
  for (const b of typeChecked) {
    it(`${at(b)} (${b.kind}${b.note ? `: ${b.note}` : ''})`, async () => {
      const run = await typecheck!;
      expect(run.signal, 'tsc was killed by its hang guard').toBeNull();
      const found = diagnostics(run.stdout);
      expect(found.get(''), 'tsc output that names no file').toBeUndefined();
      expect(found.get(b.file) ?? [], `tsc on ${at(b)}, as ${b.file}`).toEqual([]);
    }, 300_000);
  }
});

describe.concurrent('the examples of README.md and docs/ run from the packed package', () => {
  runnable.forEach((b, i) => {
    it(`${at(b)} (${b.lang}) exits 0 by itself against REDIS_URL`, async () => {
      const run = await limited(() => runBlock(b, i + 1));
      const said = `${at(b)}\n--- stdout\n${run.stdout}--- stderr\n${run.stderr}`;
      expect(run.signal, `killed after ${HANG_GUARD_MS} ms: ${said}`).toBeNull();
      expect(run.stderr, said).toBe('');
      expect(run.code, said).toBe(0);
    }, 600_000);
  });
});
