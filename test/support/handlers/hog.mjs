// Allocates until the thread's memory cap (resourceLimits) ends it.
export default function hog() {
  const kept = [];
  for (;;) kept.push(new Array(1e6).fill(kept.length));
}
