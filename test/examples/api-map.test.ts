// docs/reference/api.md is the map of what the package exports: every name each entry point of
// package.json's `exports` offers is on it, and so is every public member of a Queue (the verbs),
// so a new export or verb cannot ship without a line saying where it is described. Members tagged
// `@internal` in their doc comment are plumbing for the runtime's own rooms and tools, not API.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { readPage } from '../support/docs.js';
import { ROOT } from '../support/run-process.js';

const apiPage = readPage('docs/reference/api.md');

/** Each subpath of package.json's `exports` and the source file its declarations come from. */
function entryPoints(): Map<string, string> {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    exports: Record<string, string | { types: string }>;
  };
  const entries = new Map<string, string>();
  for (const [subpath, target] of Object.entries(pkg.exports)) {
    if (typeof target === 'string') continue; // ./package.json: a file, not code
    const source = target.types.replace(/^\.\/dist\//, 'src/').replace(/\.d\.ts$/, '.ts');
    entries.set(subpath === '.' ? 'echomq' : `echomq/${subpath.slice(2)}`, source);
  }
  return entries;
}

const entries = entryPoints();
const program = ts.createProgram(
  [...entries.values()].map((file) => join(ROOT, file)),
  {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    strict: true,
    noEmit: true,
  },
);
const checker = program.getTypeChecker();

function exportsOf(file: string): ts.Symbol[] {
  const source = program.getSourceFile(join(ROOT, file));
  if (!source) throw new Error(`${file} (named by package.json's exports) is not in the program`);
  const module = checker.getSymbolAtLocation(source);
  if (!module) throw new Error(`${file} has no module symbol: does it export anything?`);
  return checker.getExportsOfModule(module);
}

/** Whether the map names `name` as code: `name`, or `name(…)` for a call. */
function named(name: string): boolean {
  return apiPage.includes(`\`${name}\``) || apiPage.includes(`\`${name}(`);
}

function isInternal(symbol: ts.Symbol): boolean {
  return (symbol.declarations ?? []).some((declaration) =>
    ts.getJSDocTags(declaration).some((tag) => tag.tagName.text === 'internal'),
  );
}

function isPublic(symbol: ts.Symbol): boolean {
  const declaration = symbol.declarations?.[0];
  if (!declaration || symbol.name.startsWith('#')) return false;
  const flags = ts.getCombinedModifierFlags(declaration);
  return (flags & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) === 0;
}

describe('docs/reference/api.md, the map of the exports', () => {
  it('covers every entry point of package.json', () => {
    for (const subpath of entries.keys()) expect(apiPage, subpath).toContain(`\`${subpath}\``);
  });

  for (const [subpath, file] of entries) {
    it(`names every export of ${subpath}`, () => {
      const names = exportsOf(file).map((symbol) => symbol.name);
      expect(names.length, `${file} exports nothing`).toBeGreaterThan(0);
      expect(names.filter((name) => !named(name))).toEqual([]);
    });
  }

  it('names every public member of a Queue that is not @internal', () => {
    const queue = exportsOf('src/index.ts').find((symbol) => symbol.name === 'Queue');
    if (!queue) throw new Error('echomq no longer exports Queue');
    const type = checker.getDeclaredTypeOfSymbol(checker.getAliasedSymbol(queue));
    const members = checker
      .getPropertiesOfType(type)
      .filter((member) => isPublic(member) && !isInternal(member))
      .map((member) => member.name);
    expect(members).toContain('enqueue');
    expect(members.filter((name) => !named(name))).toEqual([]);
  });
});
