// A Redis sorted set: members ordered by score, then by member bytes (latin1 strings compare
// bytewise with <). A sorted array with binary search: queue sets hold thousands of members,
// where moving a slice of the array is cheaper than a skip list's allocations.

export interface Bound {
  value: number;
  exclusive: boolean;
}

export class SortedSet {
  readonly scores = new Map<string, number>();
  private members: string[] = [];

  get size(): number {
    return this.members.length;
  }

  score(member: string): number | undefined {
    return this.scores.get(member);
  }

  /** Sets a member's score; true when the member is new. */
  set(member: string, score: number): boolean {
    const old = this.scores.get(member);
    if (old !== undefined) {
      if (old === score) return false;
      this.members.splice(this.indexOf(member, old), 1);
    }
    this.scores.set(member, score);
    this.members.splice(this.lowerBound(score, member), 0, member);
    return old === undefined;
  }

  delete(member: string): boolean {
    const old = this.scores.get(member);
    if (old === undefined) return false;
    this.members.splice(this.indexOf(member, old), 1);
    this.scores.delete(member);
    return true;
  }

  /** Members at ranks [start, stop] (inclusive, already clamped by the caller). */
  slice(start: number, stop: number): string[] {
    return this.members.slice(start, stop + 1);
  }

  /** The rank range [first, last) of members whose scores lie within min..max. */
  rankRange(min: Bound, max: Bound): [number, number] {
    const first = min.exclusive ? this.upperScore(min.value) : this.lowerScore(min.value);
    const last = max.exclusive ? this.lowerScore(max.value) : this.upperScore(max.value);
    return [first, Math.max(first, last)];
  }

  rank(member: string): number | undefined {
    const s = this.scores.get(member);
    return s === undefined ? undefined : this.indexOf(member, s);
  }

  /** Removes the members at ranks [start, end) and returns them. */
  removeRanks(start: number, end: number): string[] {
    const gone = this.members.splice(start, end - start);
    for (const m of gone) this.scores.delete(m);
    return gone;
  }

  private indexOf(member: string, score: number): number {
    return this.lowerBound(score, member);
  }

  /** The first rank whose (score, member) is not below (score, member). */
  private lowerBound(score: number, member: string): number {
    let lo = 0;
    let hi = this.members.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const m = this.members[mid]!;
      const s = this.scores.get(m)!;
      if (s < score || (s === score && m < member)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The first rank with a score >= `score`. */
  private lowerScore(score: number): number {
    let lo = 0;
    let hi = this.members.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.scores.get(this.members[mid]!)! < score) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The first rank with a score > `score`. */
  private upperScore(score: number): number {
    let lo = 0;
    let hi = this.members.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.scores.get(this.members[mid]!)! <= score) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
