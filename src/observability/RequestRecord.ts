import { randomUUID } from "node:crypto"
import type { IncomingMessage } from "node:http"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
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
 * What is known about one request while it is served, for its metrics, log line and spans. The front
 * door creates it on arrival; the router notes the route pattern and the API-key middleware the caller.
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
}

/** The record travels on the Node request itself (nothing outlives the request, no map to look it up in). */
const RecordKey = Symbol.for("pv/RequestRecord")

interface Recorded {
  [RecordKey]?: RequestRecord
}

/** Called by the front door once per request, before anything answers it. */
export const beginRequest = (req: IncomingMessage, id: string, startedAt: number): RequestRecord => {
  const record: RequestRecord = { id, startedAt, route: null, keyId: null, tenantId: null }
  ;(req as Recorded)[RecordKey] = record
  return record
}

export const recordOfMessage = (req: object): RequestRecord | undefined => (req as Recorded)[RecordKey]

/** The record of an Effect-side request (undefined when it did not come through the front door). */
export const recordOf = (request: HttpServerRequest.HttpServerRequest): RequestRecord | undefined =>
  recordOfMessage(NodeHttpServerRequest.toIncomingMessage(request))

/** The request id the front door settled on (it also rewrote the header to it). */
export const requestIdOf = (request: HttpServerRequest.HttpServerRequest): string | undefined => {
  const id = request.headers[RequestIdHeader]
  return typeof id === "string" ? id : undefined
}

/**
 * RFC 9457 `instance` of a problem: the occurrence, named by its request id. A client-chosen id may
 * hold characters a URI cannot, so it is percent-encoded (a generated UUID reads unchanged).
 */
export const problemInstance = (requestId: string): string => `urn:pv:request:${encodeURIComponent(requestId)}`

/** The caller of an API-key request, for the request log (ids only). */
export const noteCaller = (request: HttpServerRequest.HttpServerRequest, keyId: string, tenantId: string): void => {
  const record = recordOf(request)
  if (record !== undefined) {
    record.keyId = keyId
    record.tenantId = tenantId
  }
}
