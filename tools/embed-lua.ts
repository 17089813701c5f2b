// Scripts stay plain, self-contained .lua files that any runtime loads verbatim; the code
// several scripts share lives once in protocol/lib/ and is copied between markers:
//   -- >>> lib/lanes.lua
//   -- <<< lib/lanes.lua
// Run `npm run protocol:embed` after editing protocol/lib/; test/protocol/conformance.test.ts fails
// when a script's copy differs from its source.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const BLOCK = /^-- >>> (lib\/[\w.-]+\.lua)\n[\s\S]*?^-- <<< \1$/gm;

export const protocolDir = join(dirname(fileURLToPath(import.meta.url)), '..', 'protocol');

/** The script text with every marked block refilled from its lib file. */
export function embedLibs(script: string, readLib: (name: string) => string): string {
  return script.replace(
    BLOCK,
    (_all, name: string) => `-- >>> ${name}\n${readLib(name).trimEnd()}\n-- <<< ${name}`,
  );
}

export function readProtocolLib(name: string): string {
  return readFileSync(join(protocolDir, name), 'utf8');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const dir = join(protocolDir, 'scripts');
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.lua'))) {
    const path = join(dir, file);
    const before = readFileSync(path, 'utf8');
    const after = embedLibs(before, readProtocolLib);
    if (after !== before) {
      writeFileSync(path, after);
      console.log(`embedded libs into ${file}`);
    }
  }
}
