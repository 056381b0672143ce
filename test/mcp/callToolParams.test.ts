import { describe, expect, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import * as fc from "fast-check"
import { callToolParamsOf } from "../../src/mcp/Mcp.js"

// The schema the direct check stands in for (src/mcp/Mcp.ts CallToolParams).
const CallToolParams = Schema.Struct({
  name: Schema.String,
  arguments: Schema.optionalKey(Schema.Record(Schema.String, Schema.Unknown))
})
const bySchema = Schema.decodeUnknownResult(CallToolParams)

describe("tools/call params, checked directly", () => {
  const params = fc.oneof(
    fc.jsonValue(),
    fc.record({ name: fc.oneof(fc.string(), fc.jsonValue()), arguments: fc.jsonValue(), _meta: fc.jsonValue() }, { requiredKeys: [] }),
    fc.record({ name: fc.string(), arguments: fc.dictionary(fc.string(), fc.jsonValue()) }, { requiredKeys: ["name"] })
  ).map((value) => JSON.parse(JSON.stringify(value)) as unknown)

  it("succeeds exactly when the schema does, with the schema's value", () => {
    fc.assert(fc.property(params, (value) => {
      const direct = callToolParamsOf(value)
      const schema = bySchema(value ?? {}, { errors: "all" })
      expect(Result.isSuccess(direct)).toBe(Result.isSuccess(schema))
      if (Result.isSuccess(direct) && Result.isSuccess(schema)) expect(direct.success).toEqual(schema.success)
    }), { seed: 2607, numRuns: 2000 })
  })
})
