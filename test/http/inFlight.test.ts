import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { InFlight, type InFlightEntry } from "../../src/http/InFlight.js"

/** An operation on the list: add a new value, or remove the entry at an index among those ever added. */
type Op = { readonly add: true } | { readonly remove: number }

const ops = fc.array(fc.oneof(fc.constant<Op>({ add: true }), fc.nat({ max: 200 }).map((i): Op => ({ remove: i }))), { maxLength: 400 })

describe("the front door's requests in flight (InFlight)", () => {
  it("behaves as a set of the values added and not removed, whatever the order of adds and removes", () => {
    fc.assert(fc.property(ops, (sequence) => {
      const list = new InFlight<number>()
      const model = new Map<number, number>()
      const entries: Array<InFlightEntry<number>> = []
      for (const op of sequence) {
        if ("add" in op) {
          const value = entries.length
          entries.push(list.add(value, value * 10))
          model.set(value, value * 10)
        } else if (entries.length > 0) {
          const index = op.remove % entries.length
          expect(list.remove(entries[index]!)).toBe(model.delete(index))
        }
        expect(list.size).toBe(model.size)
        const seen: Array<number> = []
        list.forEach((value) => seen.push(value))
        expect(seen.sort((a, b) => a - b)).toEqual([...model.keys()].sort((a, b) => a - b))
      }
      // Every entry still in flight kept its arrival time; every one removed points at nothing.
      entries.forEach((entry, value) => {
        if (model.has(value)) expect([entry.value, entry.startedAt]).toEqual([value, model.get(value)])
        else expect([entry.value, entry.prev, entry.next]).toEqual([undefined, undefined, undefined])
      })
    }))
  })

  it("lets forEach's callback remove entries, the one it is given included", () => {
    fc.assert(fc.property(fc.integer({ min: 0, max: 50 }), fc.func(fc.boolean()), (count, removeIt) => {
      const list = new InFlight<number>()
      const entries = Array.from({ length: count }, (_, i) => list.add(i, i))
      const visited: Array<number> = []
      let removed = 0
      list.forEach((value) => {
        visited.push(value)
        if (removeIt(value)) removed += list.remove(entries[value]!) ? 1 : 0
      })
      expect(visited.sort((a, b) => a - b)).toEqual(entries.map((_, i) => i))
      expect(list.size).toBe(count - removed)
    }))
  })
})
