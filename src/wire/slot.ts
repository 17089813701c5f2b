// The Redis Cluster hash slot of a key: CRC16 (XMODEM) of its hash tag (the text between the
// first '{' and the next '}', when not empty) or of the whole key, mod 16384. The flows across
// queues use it to tell whether one script can reach every queue of a flow (SPEC 14.1).

/** CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0) of the bytes. */
function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const b of bytes) {
    crc ^= b << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** The slot `key` maps to on a Redis Cluster. */
export function keySlot(key: string): number {
  const open = key.indexOf('{');
  if (open !== -1) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) key = key.slice(open + 1, close);
  }
  return crc16(new TextEncoder().encode(key)) % 16384;
}
