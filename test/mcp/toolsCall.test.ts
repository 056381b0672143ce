import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Tracer } from "effect"
import { Caller } from "../../src/access/ApiKeys.js"
import type { ApiKeyRecord } from "../../src/domain/ApiKeyRecord.js"
import { DeterminationNotFound } from "../../src/domain/Problem.js"
import { Subscriptions } from "../../src/webhooks/Subscriptions.js"
import { Mcp } from "../../src/mcp/Mcp.js"
import { Receipts } from "../../src/receipts/Receipts.js"
import { Determinations } from "../../src/trust/Determinations.js"
import { TrustResolver } from "../../src/trust/TrustResolver.js"

// The direct tools/call path (Mcp.ts toolsCall) with a resolver that fails: the path under test is the real
// one; only the service behind the tool is replaced, to make it fail in the two ways a tool can.
const caller: ApiKeyRecord = {
  key_id: "key_1", key_prefix: "pv_live_ab", tenant_id: "t", name: "n", scopes: ["mcp:call", "trust:read"],
  rate_limit_per_minute: 60, daily_quota: 1000, created_at: "2026-01-01T00:00:00.000Z", expires_at: null, revoked_at: null,
  last_used_at: null, key_hash: "0".repeat(64)
}

const withResolver = (resolve: () => Effect.Effect<never, DeterminationNotFound>) =>
  Mcp.layerNoDeps.pipe(Layer.provide([
    Layer.succeed(TrustResolver, { resolve, resolveCached: resolve, peek: () => undefined } as unknown as TrustResolver["Service"]),
    Layer.succeed(Determinations, {} as Determinations["Service"]),
    Layer.succeed(Receipts, {} as Receipts["Service"]),
    Layer.succeed(Subscriptions, {} as Subscriptions["Service"])
  ]))

const call = (modern: boolean) => {
  const meta = { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} }
  const params = { name: "resolve_trust", arguments: { public_id: "DET-V1-ACME-ROBOTICS-0001" }, ...(modern ? { _meta: meta } : {}) }
  const headers: Record<string, string> = modern
    ? { "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "resolve_trust" }
    : { "mcp-protocol-version": "2025-06-18" }
  return Effect.flatMap(Mcp, (mcp) =>
    mcp.answer(JSON.stringify({ jsonrpc: "2.0", id: "c-1", method: "tools/call", params }), headers)).pipe(
      Effect.provideService(Caller, caller),
      Effect.map((reply) => reply._tag === "Answer" ? { status: reply.status, body: JSON.parse(reply.body) } : undefined)
    )
}

describe("MCP tools/call, the direct path", () => {
  it.effect("a tool that dies answers -32603 for its id with no internal detail, in both eras", () =>
    Effect.gen(function*() {
      for (const modern of [false, true]) {
        const reply = yield* call(modern)
        expect(reply).toEqual({ status: 200, body: { jsonrpc: "2.0", id: "c-1", error: { code: -32603, message: "Internal error." } } })
      }
    }).pipe(Effect.provide(withResolver(() => Effect.die(new Error("secret detail at /srv/app.ts:12"))))))

  it.effect("a domain failure is -32000 with the problem (2025) and an isError result (2026-07-28)", () =>
    Effect.gen(function*() {
      const legacy = yield* call(false)
      expect(legacy?.status).toBe(200)
      expect(legacy?.body.error).toMatchObject({ code: -32000, data: { status: 404, code: "determination-not-found" } })
      const modern = yield* call(true)
      expect(modern?.status).toBe(200)
      expect(modern?.body.result).toMatchObject({ resultType: "complete", isError: true })
      expect(JSON.parse(modern?.body.result.content[0].text)).toMatchObject({ status: 404, code: "determination-not-found" })
    }).pipe(Effect.provide(withResolver(() => Effect.fail(new DeterminationNotFound({ detail: "no determination" }))))))

  // A hot path (docs/ARCHITECTURE.md, "Services"): every POST /mcp comes through `answer`, and a span per call
  // (Effect.fn) cost 12–16 % of a tools/call's server CPU (bench/tools/ab.ts). The request's own span is the
  // HTTP server's; nothing under it is opened per call.
  it.effect("answering a POST opens no span of its own, in both eras", () =>
    Effect.gen(function*() {
      const spans: Array<string> = []
      const tracer = Tracer.make({
        span(options) {
          spans.push(options.name)
          return new Tracer.NativeSpan(options)
        }
      })
      for (const modern of [false, true]) yield* Effect.provideService(call(modern), Tracer.Tracer, tracer)
      expect(spans).toEqual([])
    }).pipe(Effect.provide(withResolver(() => Effect.fail(new DeterminationNotFound({ detail: "no determination" }))))))
})
