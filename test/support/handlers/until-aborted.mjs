// Runs until its signal aborts, then fails with the abort's reason (a cancel crosses over).
export default function untilAborted(_job, ctx) {
  return new Promise((_resolve, reject) => {
    if (ctx.signal.aborted) reject(ctx.signal.reason); // aborted before it began
    ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
  });
}
