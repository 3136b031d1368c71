/**
 * Keeps a stream's output within `max` bytes: the first half and the last half, with a marker
 * where bytes were dropped. The head says how a command started, the tail how it ended.
 */
export class OutputBuffer {
  private readonly half: number;
  private head: Buffer[] = [];
  private headBytes = 0;
  private tail: Buffer[] = [];
  private tailBytes = 0;
  private dropped = 0;

  constructor(max: number) {
    this.half = Math.max(1, Math.floor(max / 2));
  }

  get truncated(): boolean {
    return this.dropped > 0;
  }

  push(chunk: Buffer): void {
    let rest = chunk;
    if (this.headBytes < this.half) {
      const take = rest.subarray(0, this.half - this.headBytes);
      this.head.push(take);
      this.headBytes += take.length;
      rest = rest.subarray(take.length);
    }
    if (rest.length === 0) return;
    this.tail.push(rest);
    this.tailBytes += rest.length;
    while (this.tailBytes > this.half) {
      const first = this.tail[0]!;
      const excess = this.tailBytes - this.half;
      if (first.length <= excess) {
        this.tail.shift();
        this.tailBytes -= first.length;
        this.dropped += first.length;
      } else {
        this.tail[0] = first.subarray(excess);
        this.tailBytes -= excess;
        this.dropped += excess;
      }
    }
  }

  toString(): string {
    const head = Buffer.concat(this.head).toString("utf8");
    const tail = Buffer.concat(this.tail).toString("utf8");
    return this.dropped > 0 ? `${head}\n[... ${this.dropped} bytes omitted ...]\n${tail}` : head + tail;
  }
}
