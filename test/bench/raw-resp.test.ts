// bench/raw-resp.ts, the measuring stick of bench/client-cost.ts: its replies must be the ones a
// real client reads, however the socket cuts the bytes, or its figures compare unlike work.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { encodeCommand, RespParser, RespReplyError } from '../../bench/raw-resp.js';
import { ROOT, runProcess } from '../support/run-process.js';

/** complete's reply shape: statuses, the claimed job's 7 fields, wake id, wait, now, next due; then nil, +OK, an error. */
const STREAM =
  '*6\r\n*1\r\n$2\r\nOK\r\n*7\r\n$23\r\nJOB01M98H9MAT2AWWSYA8M7\r\n:1796656648550336\r\n:1\r\n$1\r\n3\r\n' +
  '$12\r\n{"i":1,"é"}\r\n$0\r\n\r\n$0\r\n\r\n$3\r\n0-1\r\n:-1\r\n:1796656648550\r\n$-1\r\n' +
  '$-1\r\n*-1\r\n+OK\r\n-ERR Function not found\r\n*0\r\n';

const EXPECTED: unknown[] = [
  [
    ['OK'],
    ['JOB01M98H9MAT2AWWSYA8M7', 1796656648550336, 1, '3', '{"i":1,"é"}', '', ''],
    '0-1',
    -1,
    1796656648550,
    null,
  ],
  null,
  null,
  'OK',
  new RespReplyError('ERR Function not found'),
  [],
];

function parseAll(chunks: Buffer[]): unknown[] {
  const replies: unknown[] = [];
  const parser = new RespParser((r) => replies.push(r));
  for (const c of chunks) {
    // The socket's read buffer is reused: hand the parser a copy and scribble over it after.
    const own = Buffer.from(c);
    parser.feed(own);
    own.fill(0);
  }
  return replies;
}

describe('raw RESP client (bench)', () => {
  it('parses arrays, bulk and simple strings, integers, errors and nil in one read', () => {
    const replies = parseAll([Buffer.from(STREAM)]);
    expect(replies).toEqual(EXPECTED);
    expect((replies[4] as Error).message).toBe('ERR Function not found');
  });

  it('parses the same replies whichever byte a read ends at', () => {
    const bytes = Buffer.from(STREAM);
    for (let cut = 1; cut < bytes.length; cut++) {
      expect(parseAll([bytes.subarray(0, cut), bytes.subarray(cut)]), `cut at ${cut}`).toEqual(EXPECTED);
    }
    expect(parseAll([...bytes].map((b) => Buffer.from([b])))).toEqual(EXPECTED);
  });

  it('encodes a command with numbers and UTF-8 text as one RESP array', () => {
    expect(encodeCommand('FCALL', ['f', 2, 'é', 30000]).toString()).toBe(
      '*5\r\n$5\r\nFCALL\r\n$1\r\nf\r\n$1\r\n2\r\n$2\r\né\r\n$5\r\n30000\r\n',
    );
  });

  it('drives both hot calls through bench/client-cost.ts with ioredis and the raw client (a smoke run)', async () => {
    // node-redis is not a dependency: the bench installs it only for a measurement.
    const tsx = join(ROOT, 'node_modules', '.bin', 'tsx');
    const { code, stdout, stderr } = await runProcess(
      tsx,
      ['bench/client-cost.ts', 'ioredis,raw,raw-string', '30', '1'],
      60_000,
    );
    expect(code, stderr).toBe(0);
    for (const client of ['ioredis', 'raw', 'raw-string'])
      for (const phase of ['enqueue', 'complete'])
        expect(stdout).toMatch(new RegExp(`^${client} ${phase}: [\\d.]+ µs`, 'm'));
  }, 90_000);
});
