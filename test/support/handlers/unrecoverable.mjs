// Throws an error named UnrecoverableError: dead-lettered at once, not retried.
export default function unrecoverable() {
  const err = new Error('bad input');
  err.name = 'UnrecoverableError';
  throw err;
}
