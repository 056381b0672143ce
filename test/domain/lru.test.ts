import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { lru } from "../../src/domain/Memo.js"

describe("lru (domain/Memo.ts)", () => {
  it("answers as a reference list ordered by last use, holding at most its capacity", () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant("get" as const), key: fc.integer({ min: 0, max: 7 }).map(String) }),
      fc.record({ kind: fc.constant("set" as const), key: fc.integer({ min: 0, max: 7 }).map(String), value: fc.integer() })
    )
    fc.assert(fc.property(fc.integer({ min: 1, max: 5 }), fc.array(op, { maxLength: 60 }), (capacity, ops) => {
      const map = lru<number>(capacity)
      // The reference: entries, least recently used first.
      let model: Array<[string, number]> = []
      for (const o of ops) {
        const at = model.findIndex(([key]) => key === o.key)
        if (o.kind === "get") {
          expect(map.get(o.key)).toBe(at === -1 ? undefined : model[at]![1])
          if (at !== -1) model = [...model.filter((_, i) => i !== at), model[at]!]
        } else {
          map.set(o.key, o.value)
          model = [...model.filter(([key]) => key !== o.key), [o.key, o.value]]
          if (model.length > capacity) model = model.slice(1)
        }
      }
      for (const [key, value] of model) expect(map.get(key)).toBe(value)
    }), { numRuns: 3000 })
  })
})
