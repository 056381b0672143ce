import { Clock, Effect, Layer, Option, Redacted, Schema } from "effect"
import { HttpServer } from "effect/http"
import type { NetAddress } from "effect/net"
import { OperatorCredential, operatorTokenFile } from "../access/Operator.js"
import { demoDeterminations } from "../demo/DemoData.js"
import { PublicId } from "../domain/PublicId.js"
import { AppConfig } from "../platform/Config.js"
import { DatabaseMode } from "../platform/Database.js"
import { Determinations } from "../trust/Determinations.js"
import { FrontDoor } from "../http/FrontDoor.js"

/** Embedded mode with an empty database loads the demo determinations; DATABASE_URL mode never does. */
export const loadDemoData = Effect.gen(function*() {
  const determinations = yield* Determinations
  const now = yield* Clock.currentTimeMillis
  for (const { publicId, body } of demoDeterminations(now)) {
    // The demo's ids are well-formed; decoding them makes them the PublicId ingest takes.
    yield* determinations.ingest(yield* Effect.orDie(Schema.decodeUnknownEffect(PublicId)(publicId)), body)
  }
})

/**
 * Before the port opens: demo data if due. Once it is open: a banner telling a person how to use it
 * (the "listening on" line is what scripts and tests wait for).
 */
export const StartupLive = Layer.effectDiscard(
  Effect.gen(function*() {
    const config = yield* AppConfig
    const mode = yield* DatabaseMode
    const determinations = yield* Determinations
    const frontDoor = yield* FrontDoor
    let demoLoaded = false
    if (mode.kind === "embedded" && config.loadDemoData && (yield* determinations.count) === 0) {
      yield* loadDemoData
      demoLoaded = true
    }
    if (!config.banner) return
    yield* Effect.forkScoped(Effect.flatMap(frontDoor.listening, (address) => printBanner(address, demoLoaded)))
  })
)

const printBanner = (address: NetAddress.SocketAddress, demoLoaded: boolean) =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const mode = yield* DatabaseMode
    const operator = yield* OperatorCredential
    const operatorHint = mode.kind === "embedded" && Option.isNone(config.operatorToken)
      ? `$(cat ${operatorTokenFile(mode.dataDir)})`
      : "$PV_OPERATOR_TOKEN"
    const base = HttpServer.formatAddress(address)
    const lines = [
      `pv trust service listening on ${base}`,
      `  in a browser:  ${base}/   (a determination, its verified event chain, receipt proofs)`,
      `  API docs:      ${base}/docs   (OpenAPI: ${base}/openapi.json)`,
      `  database:      ${mode.kind === "embedded" ? `embedded PGlite in ${mode.dataDir}` : "PostgreSQL (DATABASE_URL)"}`
    ]
    if (demoLoaded) lines.push("  demo data:     loaded 6 determinations (DET-V1-ACME-ROBOTICS-0001, …)")
    if (mode.kind === "embedded" && Option.isNone(config.operatorToken)) {
      const file = operatorTokenFile(mode.dataDir)
      lines.push(`  operator token: ${file}${Option.isSome(operator.generatedFile) ? " (generated now)" : ""}`)
      if (Option.isSome(operator.generatedFile) && Option.isSome(operator.token)) {
        lines.push(`  operator token value (shown once): ${Redacted.value(operator.token.value)}`)
      }
    } else if (!operator.configured) {
      lines.push("  operator token: not configured (set PV_OPERATOR_TOKEN to enable /api/v1/api-keys and ingestion)")
    }
    lines.push(
      "  try it:",
      `    curl -s ${base}/api/v1/trust/DET-V1-ACME-ROBOTICS-0001/human`,
      `    curl -s -X POST ${base}/api/v1/api-keys -H "Authorization: Bearer ${operatorHint}" \\`,
      `      -H 'content-type: application/json' -d '{"tenant_id":"demo","name":"my key","scopes":["trust:read"]}'`
    )
    yield* Effect.sync(() => console.log(lines.join("\n")))
  })
