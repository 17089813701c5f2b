// The documentation's pages, for the tests that check what they say: README.md (the front door)
// and every page under docs/ (the guide and the reference). One list, so a new page is checked by
// every such test without naming it anywhere.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './run-process.js';

function markdownUnder(dir: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) found.push(...markdownUnder(path));
    else if (entry.name.endsWith('.md')) found.push(path);
  }
  return found;
}

/** Every page, repository-relative: README.md first, then docs/**\/*.md in name order. */
export const DOC_PAGES: readonly string[] = ['README.md', ...markdownUnder('docs').sort()];

/** A page's text, by its repository-relative path. */
export function readPage(page: string): string {
  return readFileSync(join(ROOT, page), 'utf8');
}

/** The pages whose text contains `text`. */
export function pagesShowing(text: string): string[] {
  return DOC_PAGES.filter((page) => readPage(page).includes(text));
}
