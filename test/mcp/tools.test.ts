import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import { objectJsonSchema } from "../../src/mcp/ToolJsonSchema.js"
import { tools } from "../../src/mcp/Tools.js"
import { DocumentedToolScopes } from "../support/toolScopes.js"

/** docs/API.md §12.4: the registry as tools/list shows it. */
const documentedScopes = DocumentedToolScopes

/** A request's 7 caller fields (docs/API.md §9.1): a tool that takes them lists them all. */
const callerFields = [/tenant_id/, /organization/, /principal/, /subject_public_id/, /purpose_id/, /requested_action/, /claim_scope/]

/** Refusing server-derived fields (docs/API.md §9.1): a tool that takes the request says not to send them. */
const neverDerived = /Never send server-derived fields/

/** What an agent must learn from each description: what comes back, and what it may (not) do with it (docs/API.md §12.4). */
const DescriptionMustSay: Readonly<Record<string, ReadonlyArray<RegExp>>> = {
  resolve_trust: [/pv\.machine-trust\.v1/, /trust_state_digest/, /GET \/api\/v1\/trust\/\{publicId\}\/machine/, /compare_current/,
    /not permission to rely/, /freshness\.state \(CURRENT\)/, /NOT_AUTHORIZED/],
  resolve_subject: [/exactly one of/, /pv\.machine-trust\.v1/, /ordered by public id/, /not permission to rely/, /NOT_AUTHORIZED/],
  resolve_lifecycle: [/without claims or evidence/, /freshness\.state is CURRENT/, /NOT_AUTHORIZED/],
  compare_current: [/changed is true when the current trust_state_digest differs/, /\{ field, previous, current \}/,
    /Re-evaluate before relying again/],
  evaluate_actionability: [/without storing anything/, /verdicts \(freshness, lifecycle, authority, tier, eligibility, claim_scope\)/,
    /Act only on decision ACTIONABLE/, /GET \/api\/v1\/policy/, ...callerFields, neverDerived],
  create_reliance_receipt: [/pv-reliance-receipt-v1/, /also when the decision is NOT_ACTIONABLE/, /act only when decision is ACTIONABLE/,
    /idempotent: true/, /receipt_digest = SHA-256 of the RFC 8785 form of snapshot_payload/, ...callerFields, neverDerived],
  get_reliance_receipt: [/rr_ \+ ULID/, /Ed25519 signature/, /include_proof: true/, /verify offline/, /not-yet-logged/, /retry after a second/,
    /compare_current/, /not permission/],
  subscribe_trust_changes: [/events_url/, /next_after/, /signed, hash-chained events/, /webhook_secret once/, /Standard Webhooks/,
    /returns the same subscription/, /not permission/]
}

/** Every `$ref` in a schema document, which must all point into its own `$defs`. */
const refsOf = (node: unknown): Array<string> =>
  typeof node !== "object" || node === null
    ? []
    : Object.entries(node).flatMap(([key, value]) => (key === "$ref" && typeof value === "string" ? [value] : refsOf(value)))

describe("tool registry", () => {
  it("declares exactly the 8 tools of docs/API.md §12.4, once each, with their scopes", () => {
    expect(tools.map((t) => t.name).sort()).toEqual(Object.keys(documentedScopes).sort())
    for (const tool of tools) expect(tool.scope, tool.name).toBe(documentedScopes[tool.name])
  })

  it("describes each tool by what an agent must know to call it and to act on its answer", () => {
    for (const tool of tools) {
      const says = tool.description
      // Every argument the input schema declares is named, and the description ends with the scope it needs.
      const branches = (tool.inputSchema.anyOf as Array<Record<string, unknown>> | undefined) ?? [tool.inputSchema]
      const members = new Set(branches.flatMap((branch) => Object.keys((branch.properties ?? {}) as object)))
      expect(members.size, tool.name).toBeGreaterThan(0)
      for (const member of members) expect(says, `${tool.name} names its argument ${member}`).toContain(member)
      expect(says, tool.name).toMatch(new RegExp(`Scope: ${tool.scope}\\.$`))
      // What the tool returns, and the rule of docs/API.md §12.4 (and §6.4) for relying on it.
      for (const phrase of DescriptionMustSay[tool.name]!) expect(says, `${tool.name} must say ${String(phrase)}`).toMatch(phrase)
    }
    expect(Object.keys(DescriptionMustSay).sort()).toEqual(tools.map((t) => t.name).sort())
  })

  it("gives each tool a title of its own and all four annotation hints", () => {
    expect(new Set(tools.map((t) => t.title)).size).toBe(tools.length)
    for (const tool of tools) {
      expect(tool.title, tool.name).toMatch(/^[A-Z][a-z]+ /)
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
