import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { InFlight, type InFlightEntry } from "../../src/http/InFlight.js"

/** An operation on the list: add a new value, or remove the entry at an index among those ever added. */
type Op = { readonly add: true } | { readonly remove: number }

interface Value {
  readonly n: number
}

const ops = fc.array(fc.oneof(fc.constant<Op>({ add: true }), fc.nat({ max: 200 }).map((i): Op => ({ remove: i }))), { maxLength: 400 })

const valuesOf = (list: InFlight<Value>) => {
  const seen: Array<number> = []
  list.forEach((value) => seen.push(value.n))
  return seen.sort((a, b) => a - b)
}

describe("the front door's requests in flight (InFlight)", () => {
  it("behaves as a set of the values added and not removed, whatever the order of adds and removes", () => {
    fc.assert(fc.property(ops, (sequence) => {
      const list = new InFlight<Value>()
      const model = new Map<number, number>()
      const entries: Array<InFlightEntry<Value>> = []
      for (const op of sequence) {
        if ("add" in op) {
          const n = entries.length
          entries.push(list.add({ n }, n * 10))
          model.set(n, n * 10)
        } else if (entries.length > 0) {
          const index = op.remove % entries.length
          expect(list.remove(entries[index]!)).toBe(model.delete(index))
        }
        expect(list.size).toBe(model.size)
        expect(valuesOf(list)).toEqual([...model.keys()].sort((a, b) => a - b))
      }
      // Every entry still in flight kept its value and arrival time; every one removed points at nothing.
      entries.forEach((entry, n) => {
        if (model.has(n)) expect([entry.value?.n, entry.startedAt]).toEqual([n, model.get(n)])
        else expect([entry.value, entry.prev, entry.next]).toEqual([undefined, undefined, undefined])
      })
    }))
  })

  it("lets forEach's callback remove any entries: each value in flight at the start is visited unless removed before its turn", () => {
    fc.assert(fc.property(fc.integer({ min: 0, max: 40 }), fc.array(fc.array(fc.nat({ max: 39 }), { maxLength: 3 }), { maxLength: 40 }), (count, removals) => {
      const list = new InFlight<Value>()
      const entries = Array.from({ length: count }, (_, n) => list.add({ n }, n))
      const removed = new Set<number>()
      const visited: Array<number> = []
      let turn = 0
      list.forEach((value) => {
        expect(removed.has(value.n)).toBe(false)
        visited.push(value.n)
        for (const index of removals[turn++] ?? []) {
          if (index < count && list.remove(entries[index]!)) removed.add(index)
        }
      })
      // Newest first; everything not removed before its turn was visited.
      const order = entries.map((_, n) => n).reverse()
      expect(visited).toEqual(order.filter((n) => visited.includes(n)))
      for (const n of order) expect(visited.includes(n) || removed.has(n)).toBe(true)
      expect(list.size).toBe(count - removed.size)
    }))
  })
})
