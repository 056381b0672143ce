import { Schema } from "effect"
import { FieldDescriptions, titleOf } from "./Descriptions.js"

// A tool's JSON Schemas as MCP wants them: rendered once from the tool's input and output schemas.

export type JsonSchemaObject = { readonly type: "object" } & Record<string, unknown>

type JsonSchemaNode = Record<string, unknown>

/** The dialect `Schema.toJsonSchemaDocument` writes, and MCP's default for tool schemas. */
export const JsonSchemaDialect = "https://json-schema.org/draft/2020-12/schema"

const DefsPrefix = "#/$defs/"

/** Names of the definitions a schema node refers to, at any depth. */
const referencedDefinitions = (node: unknown): Array<string> =>
  typeof node !== "object" || node === null
    ? []
    : Object.entries(node).flatMap(([key, value]) =>
      key === "$ref" && typeof value === "string" && value.startsWith(DefsPrefix)
        ? [value.slice(DefsPrefix.length)]
        : referencedDefinitions(value))

/**
 * `Schema.toJsonSchemaDocument` (draft 2020-12, unknown members refused), with the root made a plain
 * object schema as MCP requires: a top-level `$ref` is inlined, and a union of object schemas (`anyOf`)
 * gets `type: "object"` beside it. Only definitions still reachable from the root are kept, as `$defs`.
 */
export const objectJsonSchema = (schema: Schema.Top): JsonSchemaObject => {
  const document = Schema.toJsonSchemaDocument(schema, { onExcessProperty: "error" })
  const $defs = document.definitions as Record<string, JsonSchemaNode>
  // A node that is only a reference stands for its definition.
  const deref = (node: JsonSchemaNode): JsonSchemaNode => {
    const ref = Object.keys(node).length === 1 ? node.$ref : undefined
    const target = typeof ref === "string" && ref.startsWith(DefsPrefix) ? $defs[ref.slice(DefsPrefix.length)] : undefined
    return target === undefined ? node : deref(target)
  }
  const body = deref(document.schema as JsonSchemaNode)
  const isObject = body.type === "object" ||
    (Array.isArray(body.anyOf) && body.anyOf.every((branch: JsonSchemaNode) => deref(branch).type === "object"))
  if (!isObject) throw new TypeError(`a tool schema must describe a JSON object, not ${JSON.stringify(body).slice(0, 200)}`)
  const reachable = new Set<string>()
  const visit = (node: unknown): void => {
    for (const name of referencedDefinitions(node)) {
      if (reachable.has(name)) continue
      reachable.add(name)
      visit($defs[name])
    }
  }
  visit(body)
  const kept = Object.entries($defs).filter(([name]) => reachable.has(name)).map(([name, node]) => [name, described(node)] as const)
  return {
    $schema: JsonSchemaDialect,
    ...described(body),
    type: "object",
    ...(kept.length === 0 ? {} : { $defs: Object.fromEntries(kept) })
  } as JsonSchemaObject
}

/** The schema as an agent reads it: every member that has no description of its own gets its title and its meaning from FieldDescriptions. */
const described = (node: JsonSchemaNode): JsonSchemaNode => {
  const out: JsonSchemaNode = {}
  for (const [key, value] of Object.entries(node)) {
    if (key === "properties" && typeof value === "object" && value !== null) {
      out.properties = Object.fromEntries(Object.entries(value as Record<string, JsonSchemaNode>).map(([member, schema]) => {
        const inner = described(schema)
        const meaning = FieldDescriptions[member]
        return [member, {
          title: typeof inner.title === "string" ? inner.title : titleOf(member),
          ...inner,
          ...(inner.description === undefined && meaning !== undefined ? { description: meaning } : {})
        }]
      }))
    } else if (Array.isArray(value)) {
      out[key] = value.map((item) => typeof item === "object" && item !== null ? described(item as JsonSchemaNode) : item)
    } else if (typeof value === "object" && value !== null && key !== "enum" && key !== "const") {
      out[key] = described(value as JsonSchemaNode)
    } else out[key] = value
  }
  return out
}
