import { randomUUID } from "node:crypto"
import { Context, Fiber } from "effect"
import type { HttpServerRequest } from "effect/http"

/** The request id header, in both directions (docs/API.md §13). */
export const RequestIdHeader = "x-request-id"

/** Longest client-sent request id that is kept; a longer one is replaced. */
export const MaxRequestIdLength = 128

/** 1..128 characters, each visible ASCII (0x21–0x7E). */
export const isAcceptableRequestId = (value: string): boolean => {
  if (value.length === 0 || value.length > MaxRequestIdLength) return false
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i)
    if (c < 0x21 || c > 0x7e) return false
  }
  return true
}

/** The client's id when it is acceptable, else a generated one (a repeated header is never acceptable). */
export const requestIdFrom = (sent: string | ReadonlyArray<string> | undefined): string =>
  typeof sent === "string" && isAcceptableRequestId(sent) ? sent : randomUUID()

/**
 * What is known about one request while it is served, for its metrics, log line and spans: its id, and
 * what the router (the route pattern) and the API-key middleware (the caller) note on it.
 */
export interface RequestRecord {
  readonly id: string
  /** `performance.now()` on arrival. */
  readonly startedAt: number
  /** The matched route pattern (`/api/v1/trust/:publicId/machine`); null until (or unless) a route matched. */
  route: string | null
  /** The authenticated API key's id and tenant (never the key). */
  keyId: string | null
  tenantId: string | null
  /** The JSON value of a REST body the request guard read and checked (api/Problems.ts, `keepCheckedJson`). */
  checkedJson: unknown
  /**
   * Headers every answer to the request carries (its id, CORS, RateLimit), by lower-case name: the edge puts those
   * the answer does not set itself on it (http/Edge.ts, `withRecordHeaders`).
   */
  readonly headers: Record<string, string>
}

export const makeRequestRecord = (id: string, startedAt: number): RequestRecord =>
  ({ id, startedAt, route: null, keyId: null, tenantId: null, checkedJson: undefined, headers: { [RequestIdHeader]: id } })

/**
 * The request being served: its id and record, provided to the whole router by the edge middleware
 * (http/Edge.ts), which settles the id (the client's when acceptable, else generated). Outside a request
 * (or in code run without the edge) it is `undefined`.
 */
export const RequestId = Context.Reference<RequestRecord | undefined>("pv/RequestId", { defaultValue: () => undefined })

/**
 * RFC 9457 `instance` of a problem: the occurrence, named by its request id. A client-chosen id may
 * hold characters a URI cannot, so it is percent-encoded (a generated UUID reads unchanged).
 */
export const problemInstance = (requestId: string): string => `urn:pv:request:${encodeURIComponent(requestId)}`

/**
 * The caller of an API-key request, for the request log (ids only). Called synchronously from inside the
 * API-key middleware's fiber, whose context holds the request's record.
 */
export const noteCaller = (_request: HttpServerRequest.HttpServerRequest, keyId: string, tenantId: string): void => {
  const fiber = Fiber.getCurrent()
  const record = fiber === undefined ? undefined : Context.get(fiber.context, RequestId)
  if (record !== undefined) {
    record.keyId = keyId
    record.tenantId = tenantId
  }
}
