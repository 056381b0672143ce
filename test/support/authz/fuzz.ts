import * as fc from "fast-check"
import { expectProblem, type Reply } from "../http.js"
import type { RawReply } from "./rawHttp.js"

/**
 * Fuzzing support: every violation is recorded (not thrown) so one run reports every kind of failure with
 * reproducible examples, instead of stopping (and shrinking over the network) at the first one.
 */
export class Findings {
  private readonly kinds = new Map<string, { count: number; examples: Array<string> }>()

  add(kind: string, example: string): void {
    const entry = this.kinds.get(kind) ?? { count: 0, examples: [] }
    entry.count++
    if (entry.examples.length < 3) entry.examples.push(example)
    this.kinds.set(kind, entry)
  }

  get size(): number {
    return this.kinds.size
  }

  /** One line per kind of violation: what, how often, up to 3 inputs that show it. */
  summary(): Array<string> {
    return [...this.kinds.entries()].map(([kind, { count, examples }]) => `${kind} ×${count}\n      e.g. ${examples.join("\n      e.g. ")}`)
  }
}

/** Printable, bounded description of any input (bytes escaped). */
export const describeInput = (value: unknown, max = 400): string => {
  let text: string
  try {
    text = typeof value === "string" ? value : JSON.stringify(value, (_k, v) => (Buffer.isBuffer(v) ? v.toString("latin1") : v))
  } catch {
    text = String(value)
  }
  const escaped = text.replace(/[\u0000-\u001f\u007f-\u00ff\ud800-\udfff]/g, (c) => `\\x{${c.charCodeAt(0).toString(16)}}`)
  return escaped.length > max ? `${escaped.slice(0, max)}…(${escaped.length} chars)` : escaped
}

/** Runs `probe` over a seeded sample of `arb`, `concurrency` at a time. */
export const forAllSampled = async <T>(
  arb: fc.Arbitrary<T>,
  options: { readonly seed: number; readonly numRuns: number; readonly concurrency?: number },
  probe: (value: T, index: number) => Promise<void>
): Promise<number> => {
  const values = fc.sample(arb, { seed: options.seed, numRuns: options.numRuns })
  let next = 0
  const worker = async () => {
    for (;;) {
      const i = next++
      if (i >= values.length) return
      await probe(values[i]!, i)
    }
  }
  await Promise.all(Array.from({ length: options.concurrency ?? 6 }, worker))
  return values.length
}

/** expectProblem as a predicate: the assertion message when `reply` is not the problem of docs/API.md §5, else undefined. */
export const problemViolation = (reply: Reply, status = reply.status, code?: string): string | undefined => {
  const contentType = reply.headers.get("content-type")
  if (contentType === null) return `no Content-Type (status ${reply.status}, ${reply.text.length} body bytes)`
  try {
    expectProblem(reply, status, code ?? (typeof reply.body?.code === "string" ? reply.body.code : "<no code in body>"))
    return undefined
  } catch (error) {
    return String((error as Error).message).split("\n")[0]!.slice(0, 200)
  }
}

export const pathOf = (target: string): string => {
  const q = target.indexOf("?")
  return q === -1 ? target : target.slice(0, q)
}

/** A JSON-RPC error answer of the MCP endpoint (HTTP 400 with a JSON-RPC body), which is not a problem document. */
export const isJsonRpcAnswer = (reply: Reply): boolean =>
  (reply.headers.get("content-type") ?? "").startsWith("application/json") &&
  reply.body !== null && typeof reply.body === "object" &&
  (Array.isArray(reply.body) || reply.body.jsonrpc === "2.0")

/**
 * The generic checks of every fuzzed HTTP exchange (docs/API.md §5 and §13): an answer or a close
 * within the time-out, never 5xx, and every non-2xx answer (except 304) is problem+json per docs/API.md §5.1.
 */
export const checkExchange = (
  findings: Findings,
  label: string,
  input: unknown,
  reply: RawReply | Reply,
  options: { readonly head?: boolean; readonly mcp?: boolean } = {}
): void => {
  const example = `${label}: ${describeInput(input)}`
  if ("timedOut" in reply) {
    if (reply.timedOut) {
      findings.add(`no answer and no close within ${Math.round(reply.elapsedMs / 1000)} s (hang)`, example)
      return
    }
    if (reply.status === undefined) return // the server closed the connection: allowed for unparseable input
  }
  const status = reply.status!
  const asReply: Reply = "timedOut" in reply ? toReply(reply) : reply
  if (status >= 500) {
    findings.add(`${status} answer (5xx): ${describeInput(asReply.text, 160)}`, example)
    return
  }
  if (status < 300 || status === 304) return
  if (options.mcp === true && status === 400 && isJsonRpcAnswer(asReply)) return
  if (options.head === true) {
    if (!(asReply.headers.get("content-type") ?? "").startsWith("application/problem+json")) {
      findings.add(`${status} to HEAD without problem+json Content-Type`, example)
    }
    return
  }
  const violation = problemViolation(asReply)
  if (violation !== undefined) {
    const type = asReply.headers.get("content-type") ?? "none"
    findings.add(`${status} answer that is not problem+json (Content-Type ${type}, ${asReply.text.length} body bytes): ${violation}`, example)
  }
}

const toReply = (reply: RawReply): Reply => {
  let body: unknown = undefined
  if (reply.text.length > 0) {
    try {
      body = JSON.parse(reply.text)
    } catch {
      body = undefined
    }
  }
  return { status: reply.status ?? 0, headers: reply.headers, body, text: reply.text }
}

// ---- arbitraries ----

/** Strings PostgreSQL cannot keep exactly (docs/API.md §2): NUL and lone UTF-16 surrogates. */
export const unstorableString = fc.oneof(
  fc.constantFrom("\u0000", "a\u0000b", "\ud800", "x\udfffy", "\ud800\u0000", "ok\udbff", "\udc00\ud800"),
  fc.tuple(fc.string({ maxLength: 8 }), fc.constantFrom("\u0000", "\ud800", "\udfff", "\udbff"), fc.string({ maxLength: 8 }))
    .map(([a, b, c]) => a + b + c)
)

/** Numbers as raw JSON text that JavaScript cannot keep or digests must not hold. */
export const hostileNumberText = fc.constantFrom(
  "1e400", "-1e400", "9223372036854775808", "9223372036854775807", "-9223372036854775809", "18446744073709551616",
  "1.5", "1e-400", "12345678901234567890123456789", "9007199254740993", "0.0000001", "-0"
)

/** A JSON value nested `depth` deep. */
export const nested = (depth: number, leaf: unknown = "leaf", arrays = true): unknown => {
  let value: unknown = leaf
  for (let i = 0; i < depth; i++) value = arrays && i % 2 === 0 ? [value] : { d: value }
  return value
}

export const percentSegments = [
  "%00", "%ff", "%FF", "%ED%A0%80", "%C0%AE", "%c0%af", "%2e%2e", "%2E", "%2f", "%5c", "%", "%z", "%zz", "%0", "%u0000",
  "%E2%80%AE", "%F0%9F%92%A9", "%25", "%20", "%0d%0a"
]
