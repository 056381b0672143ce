import { Data, Effect, Result, Schema } from "effect"
import { Caller, scopeRefusal } from "../access/ApiKeys.js"
import type { ApiKeyRecord } from "../domain/ApiKeyRecord.js"
import type { Scope } from "../domain/ApiKey.js"
import { fieldErrorsOf, type ProblemError, type ProhibitedField, ValidationFailed } from "../domain/Problem.js"
import type { Subscriptions } from "../webhooks/Subscriptions.js"
import type { Receipts } from "../receipts/Receipts.js"
import type { Determinations } from "../trust/Determinations.js"
import type { TrustResolver } from "../trust/TrustResolver.js"
import { rememberSuccesses } from "../domain/Memo.js"
import { type JsonSchemaObject, objectJsonSchema } from "./ToolJsonSchema.js"

// What a tool is and how one is defined: its spec, the registry entry `defineTool` makes of it (scope,
// arguments, run, encode once), and the results it hands the transport. The eight tools are in Tools.ts.

/** MCP tool annotations: hints for a client deciding whether to ask its user first. */
export interface ToolAnnotations {
  readonly readOnlyHint: boolean
  readonly destructiveHint: boolean
  readonly idempotentHint: boolean
  readonly openWorldHint: boolean
}

/** The services tools call: the same ones, and the same functions, as the REST handlers. */
export type ToolServices = TrustResolver | Determinations | Receipts | Subscriptions

export type ArgumentsProblem = ValidationFailed | ProhibitedField

/** The arguments do not satisfy the tool's inputSchema (JSON-RPC -32602). */
export class InvalidArguments extends Data.TaggedError("InvalidArguments")<{ readonly problem: ArgumentsProblem }> {}

export interface ToolSpec<I, II, O, OI> {
  readonly name: string
  readonly title: string
  readonly description: string
  readonly scope: Scope
  readonly annotations: ToolAnnotations
  readonly input: Schema.Codec<I, II>
  readonly output: Schema.Codec<O, OI>
  /** Replaces the default argument check (the input schema, unknown members refused). */
  readonly decode?: (args: unknown) => Result.Result<I, ArgumentsProblem>
  /** Runs with decoded arguments: the services take decoded values (`PublicId`, `RelianceRequest`, …). */
  readonly run: (input: I, caller: ApiKeyRecord) => Effect.Effect<O, ProblemError, ToolServices>
  /**
   * What `run` would answer, when the services hold it in memory now (a cached trust document), read
   * synchronously; undefined when only `run` can tell. The same value `run` returns at that instant.
   */
  readonly peek?: (input: I, resolver: TrustResolver["Service"], nowMs: number) => O | undefined
}

export interface EncodedResult {
  readonly value: unknown
  /** `value` as JSON text (the text content). */
  readonly text: string
  /** The whole `tools/call` result, `{ content: [{ type: "text", text }], structuredContent }`, as JSON text. */
  readonly callResultJson: string
}

/**
 * Results a tool already encoded, by result object. Services hand out immutable results (a cached trust
 * document is the same object until its state changes), so each is encoded and serialised once. The
 * cache belongs to whoever calls the tool (the `Mcp` service), not to the module.
 */
export type EncodedResults = WeakMap<object, EncodedResult>

/** A declared tool with its schemas rendered; `call` checks scope, then arguments, then runs. */
export interface Tool {
  readonly name: string
  readonly title: string
  readonly description: string
  readonly scope: Scope
  readonly annotations: ToolAnnotations
  readonly inputSchema: JsonSchemaObject
  readonly outputSchema: JsonSchemaObject
  /**
   * Makes the tool's `Peek` for one holder (the `Mcp` service): its argument checks are remembered per
   * distinct arguments in that holder, not in the module.
   */
  readonly peeker: () => Peek
  /** Resolves to the encoded result (the JSON value of `structuredContent`) and its JSON text. */
  readonly call: (
    args: unknown,
    encoded: EncodedResults
  ) => Effect.Effect<EncodedResult, InvalidArguments | ProblemError, ToolServices | Caller>
}

/**
 * The encoded result of a call whose scope and arguments pass and whose answer the services hold in memory
 * now, synchronously; undefined otherwise (`call` then answers, failures included).
 */
export type Peek = (
  args: unknown,
  caller: ApiKeyRecord,
  resolver: TrustResolver["Service"],
  nowMs: number,
  encoded: EncodedResults
) => EncodedResult | undefined

/**
 * JSON text that stands for `args` exactly when they are a few string members (a public id): then two
 * arguments with the same text have the same members and values, so any argument check answers both
 * alike. Undefined for anything else (checked afresh each time).
 */
export const stringArgumentsKey = (args: unknown): string | undefined => {
  if (typeof args !== "object" || args === null || Array.isArray(args) || Object.getPrototypeOf(args) !== Object.prototype) return undefined
  let members = 0
  for (const name in args) {
    if (!Object.hasOwn(args, name) || typeof (args as Record<string, unknown>)[name] !== "string" || ++members > 4) return undefined
  }
  return JSON.stringify(args)
}

/**
 * `decode`, with its successes remembered per distinct `stringArgumentsKey` (the last 256): a check is a
 * pure function of the arguments, so a remembered answer is the one it would give again.
 */
export const rememberedDecode = <I>(decode: (args: unknown) => Result.Result<I, ArgumentsProblem>) =>
  rememberSuccesses(stringArgumentsKey, decode)

/** A decode failure → one FieldError per issue (the domain's one translation; Mcp.ts imports it from here). */
export { fieldErrorsOf }

const argumentsProblem = (error: Schema.SchemaError): ValidationFailed =>
  new ValidationFailed({ detail: "The arguments do not match the tool's inputSchema.", errors: fieldErrorsOf(error.issue) })

/** One declaration → one registry entry; the JSON Schemas are rendered once, here. */
export const defineTool = <I, II, O, OI>(spec: ToolSpec<I, II, O, OI>): Tool => {
  const decodeStrict = Schema.decodeUnknownResult(spec.input)
  const decode = spec.decode ??
    ((args: unknown) => Result.mapError(decodeStrict(args, { errors: "all", onExcessProperty: "error" }), argumentsProblem))
  // A result that does not fit the declared outputSchema is a bug: a defect (the throw inside Effect.map),
  // never a partial answer.
  const encode = Schema.encodeSync(spec.output)
  const encodeOnce = (output: O, encoded: EncodedResults): EncodedResult => {
    const known = typeof output === "object" && output !== null ? encoded.get(output) : undefined
    if (known !== undefined) return known
    const value = encode(output, { onExcessProperty: "error" })
    const text = JSON.stringify(value)
    const result = { value, text, callResultJson: `{"content":[{"type":"text","text":${JSON.stringify(text)}}],"structuredContent":${text}}` }
    if (typeof output === "object" && output !== null) encoded.set(output, result)
    return result
  }
  return {
    name: spec.name,
    title: spec.title,
    description: spec.description,
    scope: spec.scope,
    annotations: spec.annotations,
    inputSchema: { ...objectJsonSchema(spec.input), title: `${spec.title}: arguments` },
    outputSchema: { ...objectJsonSchema(spec.output), title: `${spec.title}: result` },
    // Scope and arguments are checked synchronously; only the tool's own work is an Effect (every call
    // of every revision comes through here, so the fewer steps, the cheaper an agent's call).
    peeker: (): Peek => {
      const peek = spec.peek
      if (peek === undefined) return () => undefined
      const remembered = rememberedDecode(decode)
      return (args, caller, resolver, nowMs, encoded) => {
        if (scopeRefusal(caller, spec.scope) !== undefined) return undefined
        const input = remembered(args)
        if (Result.isFailure(input)) return undefined
        const output = peek(input.success, resolver, nowMs)
        return output === undefined ? undefined : encodeOnce(output, encoded)
      }
    },
    call: (args, encoded) =>
      Effect.flatMap(Caller, (caller): Effect.Effect<EncodedResult, InvalidArguments | ProblemError, ToolServices> => {
        const refused = scopeRefusal(caller, spec.scope)
        if (refused !== undefined) return Effect.fail(refused)
        const input = decode(args)
        if (Result.isFailure(input)) return Effect.fail(new InvalidArguments({ problem: input.failure }))
        return Effect.map(spec.run(input.success, caller), (output) => encodeOnce(output, encoded))
      })
  }
}
