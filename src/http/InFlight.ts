/**
 * The requests a server has admitted and not yet answered, each with when it arrived: a doubly linked list,
 * deliberately not a `Map`.
 *
 * A `Map` whose entries come and go with every request rebuilds its hash table every few dozen requests. Once
 * a table has lived long enough to be in V8's old generation, its rebuilds are allocated there too, and each
 * leaves a dead old table that still points at the requests in flight when it was rebuilt. A young-generation
 * collection takes every pointer from the old generation as a root, so those requests (their responses,
 * bodies and fibers) outlive their answers, are promoted, and wait for a full collection: measured at 2–6 KB
 * promoted per request and a full collection every ~2,000 requests on the front door's old `Map`
 * (docs/PERFORMANCE.md, "Decisions"). Here an entry that leaves is unlinked and cleared, so nothing dead points
 * at anything.
 */
export interface InFlightEntry<A extends object> {
  /** Undefined once removed. */
  value: A | undefined
  readonly startedAt: number
  prev: InFlightEntry<A> | undefined
  next: InFlightEntry<A> | undefined
}

export class InFlight<A extends object> {
  private head: InFlightEntry<A> | undefined = undefined
  private count = 0

  /** How many are in flight. */
  get size(): number {
    return this.count
  }

  /** Adds `value`, arrived at `startedAt`; remove it with the entry returned. */
  add(value: A, startedAt: number): InFlightEntry<A> {
    const entry: InFlightEntry<A> = { value, startedAt, prev: undefined, next: this.head }
    if (this.head !== undefined) this.head.prev = entry
    this.head = entry
    this.count++
    return entry
  }

  /** Removes an entry (once: a second call does nothing) and clears it. True when it was in flight. */
  remove(entry: InFlightEntry<A>): boolean {
    if (entry.value === undefined) return false
    if (entry.prev !== undefined) entry.prev.next = entry.next
    else this.head = entry.next
    if (entry.next !== undefined) entry.next.prev = entry.prev
    entry.value = undefined
    entry.prev = undefined
    entry.next = undefined
    this.count--
    return true
  }

  /**
   * Every value in flight when the call starts (newest first). `f` may remove any entries: one removed before
   * its turn is skipped. (For the drain, once: it copies the list.)
   */
  forEach(f: (value: A) => void): void {
    const entries: Array<InFlightEntry<A>> = []
    for (let entry = this.head; entry !== undefined; entry = entry.next) entries.push(entry)
    for (const entry of entries) if (entry.value !== undefined) f(entry.value)
  }
}
