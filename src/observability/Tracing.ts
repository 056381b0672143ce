import { Effect, Layer, Option, References, Tracer } from "effect"
import { FetchHttpClient, Headers, HttpMiddleware } from "effect/http"
import { OtlpExporter, OtlpSerialization, OtlpTracer } from "effect/observability"
import { AppConfig } from "../platform/Config.js"
import { StatementSpanName } from "../platform/Database.js"

/** The span attribute carrying the request id (also on every span a request's handler creates, SQL included). */
export const RequestIdAttribute = "pv.request_id"

/** OTLP/HTTP's traces path under the collector base URL (OTEL_EXPORTER_OTLP_ENDPOINT, per the OTel spec). */
export const tracesUrl = (endpoint: string): string => endpoint.replace(/\/+$/, "") + "/v1/traces"

/** Request headers recorded as `<redacted>` on server spans: credentials, besides Effect's own list. */
const redactedHeaders: ReadonlyArray<string> = ["authorization", "cookie", "set-cookie", "x-api-key", "x-pv-internal-token", "mcp-session-id"]

/**
 * Span names as the service has always exported them: `http.server <METHOD>` per request (the header
 * filter records every header, credentials redacted) and `sql.execute` per statement (effect/sql names
 * a statement's span after the database, `StatementSpanName`).
 */
const named = (tracer: Tracer.Tracer): Tracer.Tracer =>
  Tracer.make({
    span: (options) => tracer.span(options.kind === "client" && options.name === StatementSpanName ? { ...options, name: "sql.execute" } : options),
    context: tracer.context
  })

const otlp = (endpoint: string, serviceName: string) =>
  Layer.effect(
    Tracer.Tracer,
    Effect.map(
      OtlpTracer.make({ url: tracesUrl(endpoint), resource: { serviceName }, shutdownTimeout: "3 seconds" }),
      named
    )
  ).pipe(
    Layer.provideMerge(OtlpExporter.layerFlusher),
    Layer.provide(OtlpSerialization.layerJson),
    Layer.provide(FetchHttpClient.layer)
  )

/**
 * Tracing. With OTEL_EXPORTER_OTLP_ENDPOINT set: Effect's spans (the HTTP server span per request, the
 * SQL client's span per statement, `Effect.withSpan`s) are batched by effect/observability's OTLP tracer
 * and sent as OTLP/HTTP JSON; on stop the batch is flushed. Unset: tracing is off (`TracerEnabled` false),
 * and nothing is exported.
 */
export const TracingLive: Layer.Layer<never, never, AppConfig> = Layer.unwrap(
  Effect.map(AppConfig, (config) =>
    Option.match(config.otlpEndpoint, {
      onNone: () => Layer.succeed(References.TracerEnabled, false),
      onSome: (endpoint) =>
        Layer.mergeAll(
          Layer.succeed(Headers.CurrentRedactedNames, redactedHeaders),
          Layer.succeed(HttpMiddleware.TracerHeaderFilter, () => true),
          Layer.succeed(HttpMiddleware.SpanNameGenerator, (request) => `http.server ${request.method}`),
          otlp(endpoint, config.otelServiceName)
        )
    }))
)
