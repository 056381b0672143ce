import { Headers } from "@effect/platform"
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import { BatchSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Effect, Layer, Option } from "effect"
import { AppConfig } from "../platform/Config.js"

/** The span attribute carrying the request id (also on every span a request's handler creates, SQL included). */
export const RequestIdAttribute = "pv.request_id"

/** OTLP/HTTP's traces path under the collector base URL (OTEL_EXPORTER_OTLP_ENDPOINT, per the OTel spec). */
export const tracesUrl = (endpoint: string): string => endpoint.replace(/\/+$/, "") + "/v1/traces"

/** Request headers never copied into span attributes: credentials, besides the platform's own list. */
const redactedHeaders = ["authorization", "cookie", "set-cookie", "x-api-key", "x-pv-internal-token", "mcp-session-id"]

/**
 * Tracing. With OTEL_EXPORTER_OTLP_ENDPOINT set: Effect's spans (the platform's HTTP server span per
 * request, @effect/sql's span per statement, `Effect.withSpan`s) go through @effect/opentelemetry's
 * NodeSdk to a BatchSpanProcessor and the OTLP/HTTP (JSON) exporter; on stop the processor is flushed.
 * Unset: tracing is off exactly as before (`Layer.setTracerEnabled(false)`), and nothing is exported.
 */
export const TracingLive: Layer.Layer<never, never, AppConfig> = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) =>
    Option.match(config.otlpEndpoint, {
      onNone: () => Layer.setTracerEnabled(false),
      onSome: (endpoint) =>
        Layer.mergeAll(
          Layer.locallyScoped(Headers.currentRedactedNames, redactedHeaders),
          Layer.effectDiscard(Effect.void).pipe(
            Layer.provide(NodeSdk.layer(() => ({
              resource: { serviceName: config.otelServiceName },
              spanProcessor: new BatchSpanProcessor(new OTLPTraceExporter({ url: tracesUrl(endpoint) })),
              shutdownTimeout: "3 seconds"
            })))
          )
        )
    }))
)
