import { SchemaAST } from "effect"

/**
 * A check compiled from a schema, for the part of schemas whose JSON encoding is the identity: objects of
 * named members, arrays and tuples, strings, numbers (those whose JSON codec is the identity: checked
 * finite or integral), booleans, null, literals, and unions of such leaves. Given a value, it throws
 * whenever the schema's JSON encoder (`onExcessProperty: "error"`) throws, and otherwise answers whether
 * `JSON.stringify(value)` is already the encoder's text, `JSON.stringify(encode(value))`: true when every
 * object of the value holds its members as own enumerable properties in the order the encoder's copy
 * gets them (the schema's; JSON.stringify puts integer-like names first) and has no `toJSON`. What the
 * encoder does is written beside each step. Anything else (transformations, declarations, suspended or
 * index-signature schemas, checks on objects, unknown) has no check: `jsonFitOf` answers undefined.
 * Property reads are taken to be pure (data, not getters that answer differently each time).
 */
export type JsonFit = (value: unknown) => boolean

/** What a check throws: the value does not fit (the encoder fails too). Made once: it carries no detail. */
const DoesNotFit = new Error("the value does not fit the schema")
const doesNotFit = (): never => {
  throw DoesNotFit
}

/** The options the encoder passes to each check. */
const EncodeOptions: SchemaAST.ParseOptions = { onExcessProperty: "error" }

/** Checks an array's fit may run on the value itself: they read its length only, the same in the encoder's copy. */
const LengthChecks: ReadonlySet<string> = new Set(["effect/schema/isMinLength", "effect/schema/isMaxLength", "effect/schema/isBetweenLength"])

const filtersOf = (checks: ReadonlyArray<SchemaAST.Check<unknown>>): Array<SchemaAST.Filter<unknown>> =>
  checks.flatMap((check) => check._tag === "FilterGroup" ? filtersOf(check.checks) : [check])

/** The node's checks: its own and, after flipping, its encoding checks. */
const checksOf = (ast: SchemaAST.AST): Array<SchemaAST.Filter<unknown>> =>
  filtersOf([...ast.checks ?? [], ...("encodingChecks" in ast ? ast.encodingChecks ?? [] : [])])

/**
 * Whether the encoder keeps a leaf value as it is: its type, then the node's checks, run on the value once it
 * parsed; the first issue fails it (a check that throws ends the encoding: the throw goes through). No throw
 * for a value that does not fit: a union asks its members in turn.
 */
const leafTestOf = (ast: SchemaAST.AST): ((value: unknown) => boolean) | undefined => {
  if (ast.encoding !== undefined) return undefined
  let test: (value: unknown) => boolean
  switch (ast._tag) {
    // By typeof, as the encoder; a number here is finite or integral by its checks (else its JSON codec
    // transforms it).
    case "String":
      test = (value) => typeof value === "string"
      break
    case "Number":
      test = (value) => typeof value === "number"
      break
    case "Boolean":
      test = (value) => typeof value === "boolean"
      break
    case "Null":
      test = (value) => value === null
      break
    case "Literal": {
      // `===` the literal (so -0 fits 0; JSON.stringify writes both 0). A bigint has a JSON codec; null is no literal.
      const literal: unknown = ast.literal
      if (typeof literal !== "string" && typeof literal !== "number" && typeof literal !== "boolean") return undefined
      test = (value) => value === literal
      break
    }
    case "Union": {
      // Leaves only: the encoder tries the members in order and keeps the value once one accepts it (anyOf),
      // or when exactly one does (oneOf).
      const members = ast.types.map(leafTestOf)
      if (!members.every((member) => member !== undefined)) return undefined
      const enough = ast.options?.mode === "oneOf" ? 2 : 1
      test = (value) => {
        let accepted = 0
        for (let i = 0; i < members.length && accepted < enough; i++) if (members[i]!(value)) accepted++
        return accepted === 1
      }
      break
    }
    default:
      return undefined
  }
  const filters = checksOf(ast)
  return filters.length === 0 ? test : (value) => test(value) && filters.every((filter) => filter.run(value, ast, EncodeOptions) === undefined)
}

/** Whether JSON.stringify would call a `toJSON` of `value` (own or inherited). */
const hasToJson = (value: object): boolean => typeof (value as { toJSON?: unknown }).toJSON === "function"

/** The check of the AST the encoder parses (`SchemaAST.flip` of the JSON codec's AST); undefined outside the subset. */
export const jsonFitOf = (ast: SchemaAST.AST): JsonFit | undefined => {
  if (ast.encoding !== undefined) return undefined
  switch (ast._tag) {
    case "Arrays": {
      // An array (Array.isArray) of exactly the tuple's elements, then any number of the rest element when
      // there is one, every element required. The encoder's copy has the same elements in the same order.
      if (ast.rest.length > 1 || ast.elements.some(SchemaAST.isOptional)) return undefined
      const elements = ast.elements.map(jsonFitOf)
      const rest = ast.rest.length === 1 ? jsonFitOf(ast.rest[0]!) : undefined
      if (!elements.every((element) => element !== undefined) || (ast.rest.length === 1 && rest === undefined)) return undefined
      // Its checks run on the encoder's copy once the elements parsed: here only those that read the length alone.
      const filters = checksOf(ast)
      if (!filters.every((filter) => LengthChecks.has(String(filter.annotations?.representation?.id)))) return undefined
      const count = elements.length
      return (value) => {
        if (!Array.isArray(value) || value.length < count || (rest === undefined && value.length > count)) return doesNotFit()
        let plain = !hasToJson(value)
        for (let i = 0; i < value.length; i++) if (!(i < count ? elements[i]! : rest!)(value[i])) plain = false
        for (const filter of filters) if (filter.run(value, ast, EncodeOptions) !== undefined) doesNotFit()
        return plain
      }
    }
    case "Objects": {
      // A non-array object; no own enumerable member (string or symbol) beyond the declared ones; each
      // declared member present (`in`, own only for __proto__) unless optional, read once. The encoder's
      // copy gets the members in the schema's order, which JSON.stringify writes in the engine's own-key
      // order (integer-like names first): `members` are in that order, read from an object built alike.
      const properties = ast.propertySignatures
      if (properties.length === 0 || ast.indexSignatures.length > 0 || (ast.checks ?? ast.encodingChecks) !== undefined) return undefined
      const declared = new Set<string>()
      const order: Record<string, unknown> = {}
      const fits = new Map<string, { readonly fit: JsonFit; readonly optional: boolean }>()
      for (const property of properties) {
        const fit = jsonFitOf(property.type)
        if (typeof property.name !== "string" || fit === undefined) return undefined
        declared.add(property.name)
        fits.set(property.name, { fit, optional: SchemaAST.isOptional(property.type) })
        Object.defineProperty(order, property.name, { value: 0, enumerable: true, writable: true, configurable: true })
      }
      const members = Object.keys(order).map((name) => ({ name, own: name === "__proto__", ...fits.get(name)! }))
      return (value) => {
        if (typeof value !== "object" || value === null || Array.isArray(value)) return doesNotFit()
        const record = value as Record<string, unknown>
        const keys = Object.keys(record)
        for (const symbol of Object.getOwnPropertySymbols(record)) if (Object.prototype.propertyIsEnumerable.call(record, symbol)) doesNotFit()
        // Plain while the own enumerable names are the present members, in order (then none is excess).
        let plain = !hasToJson(record)
        let next = 0
        for (const member of members) {
          // No member type here accepts undefined: a member that reads undefined fits only when optional and absent.
          const field = member.own && !Object.hasOwn(record, member.name) ? undefined : record[member.name]
          if (field === undefined) {
            if (member.optional && !(member.own ? Object.hasOwn(record, member.name) : member.name in record)) continue
            doesNotFit()
          }
          if (keys[next] === member.name) next++
          else plain = false
          if (!member.fit(field)) plain = false
        }
        if (next !== keys.length) {
          plain = false
          for (const key of keys) if (!declared.has(key)) doesNotFit()
        }
        return plain
      }
    }
    default: {
      const test = leafTestOf(ast)
      return test === undefined ? undefined : (value) => test(value) || doesNotFit()
    }
  }
}
