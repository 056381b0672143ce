import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import { objectJsonSchema, tools } from "../../src/mcp/Tools.js"
import { ContractToolScopes } from "../support/contract.js"

/** docs/API.md §12.4: the registry as tools/list shows it. */
const contractScopes = ContractToolScopes

/** Every `$ref` in a schema document, which must all point into its own `$defs`. */
const refsOf = (node: unknown): Array<string> =>
  typeof node !== "object" || node === null
    ? []
    : Object.entries(node).flatMap(([key, value]) => (key === "$ref" && typeof value === "string" ? [value] : refsOf(value)))

describe("tool registry", () => {
  it("declares exactly the 8 tools of docs/API.md §12.4, once each, with their scopes", () => {
    expect(tools.map((t) => t.name).sort()).toEqual(Object.keys(contractScopes).sort())
    for (const tool of tools) expect(tool.scope, tool.name).toBe(contractScopes[tool.name])
  })

  it("gives each tool a title, an actionable description and all four annotation hints", () => {
    for (const tool of tools) {
      expect(tool.title.length, tool.name).toBeGreaterThan(3)
      expect(tool.description.length, tool.name).toBeGreaterThan(120)
      expect(tool.description, tool.name).toContain(`Scope: ${tool.scope}`)
      expect(Object.keys(tool.annotations).sort()).toEqual(["destructiveHint", "idempotentHint", "openWorldHint", "readOnlyHint"])
      expect(tool.annotations.destructiveHint, tool.name).toBe(false)
      // Only a subscription can make the service reach outside itself (a webhook URL the caller names).
      expect(tool.annotations.openWorldHint, tool.name).toBe(tool.name === "subscribe_trust_changes")
    }
    const writers = tools.filter((t) => !t.annotations.readOnlyHint).map((t) => t.name).sort()
    expect(writers).toEqual(["create_reliance_receipt", "subscribe_trust_changes"])
  })

  it("renders object JSON Schemas whose references all resolve", () => {
    for (const tool of tools) {
      for (const schema of [tool.inputSchema, tool.outputSchema]) {
        expect(schema.type, tool.name).toBe("object")
        // JSON Schema 2020-12, MCP's default dialect (what `Schema.toJsonSchemaDocument` writes).
        expect(schema.$schema).toBe("https://json-schema.org/draft/2020-12/schema")
        const defs = (schema.$defs ?? {}) as Record<string, unknown>
        for (const ref of refsOf(schema)) {
          expect(ref, tool.name).toMatch(/^#\/\$defs\//)
          expect(defs[ref.slice("#/$defs/".length)], `${tool.name} ${ref}`).toBeDefined()
        }
        // No definition is left that nothing refers to.
        for (const name of Object.keys(defs)) expect(refsOf(schema), `${tool.name} ${name}`).toContain(`#/$defs/${name}`)
      }
    }
  })

  it("refuses unknown members in every input schema", () => {
    for (const tool of tools) {
      const branches = (tool.inputSchema.anyOf as Array<Record<string, unknown>> | undefined) ?? [tool.inputSchema]
      for (const branch of branches) expect(branch.additionalProperties, tool.name).toBe(false)
    }
  })
})

describe("objectJsonSchema", () => {
  it("inlines a top-level reference", () => {
    const Named = Schema.Struct({ a: Schema.String }).annotate({ identifier: "Named" })
    const schema = objectJsonSchema(Named)
    expect(schema).toMatchObject({ type: "object", required: ["a"], properties: { a: { type: "string" } } })
    expect(schema.$ref).toBeUndefined()
    expect(schema.$defs).toBeUndefined()
  })

  it("keeps a recursive root's own definition", () => {
    interface Tree { readonly children: ReadonlyArray<Tree> }
    const Tree: Schema.Codec<Tree> = Schema.Struct({
      children: Schema.Array(Schema.suspend((): Schema.Codec<Tree> => Tree))
    }).annotate({ identifier: "Tree" })
    const schema = objectJsonSchema(Tree)
    expect(schema.type).toBe("object")
    expect(Object.keys(schema.$defs as object)).toEqual(["Tree"])
  })

  it("marks a union of objects as an object and refuses anything that is not one", () => {
    const either = objectJsonSchema(Schema.Union([Schema.Struct({ a: Schema.String }), Schema.Struct({ b: Schema.Number })]))
    expect(either.type).toBe("object")
    expect(either.anyOf).toHaveLength(2)
    expect(() => objectJsonSchema(Schema.String)).toThrow(/JSON object/)
    expect(() => objectJsonSchema(Schema.Union([Schema.Struct({ a: Schema.String }), Schema.String]))).toThrow(/JSON object/)
  })
})
