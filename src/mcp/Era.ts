import * as JsonRpc from "./JsonRpc.js"

/**
 * Which MCP revision a POST speaks, and the request-metadata rules of revision 2026-07-28 (docs/API.md,
 * "MCP"). Pure: the HTTP headers and the parsed body in, a route or a JSON-RPC refusal (with its HTTP
 * status) out.
 *
 * Two eras share the endpoint. The 2025 revisions (2025-11-25, 2025-06-18, 2025-03-26) open with
 * `initialize`; revision 2026-07-28 has no handshake: every request names its version and the client's
 * capabilities in `params._meta`, mirrored by the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name`
 * headers. The body decides the era (as the official SDK's server does): a request whose `_meta` holds
 * the protocol-version key is a 2026-07-28 request; anything else is served as a 2025 revision.
 */

/** The revisions with `initialize`, newest first: initialize echoes the client's when listed here, else offers the newest. */
export const SupportedProtocolVersions = ["2025-11-25", "2025-06-18", "2025-03-26"] as const
export type ProtocolVersion = typeof SupportedProtocolVersions[number]
export const LatestProtocolVersion: ProtocolVersion = SupportedProtocolVersions[0]

/** The stateless revisions (per-request `_meta`, `server/discover`). */
export const ModernProtocolVersions = ["2026-07-28"] as const
export type ModernProtocolVersion = typeof ModernProtocolVersions[number]
export const ModernProtocolVersion: ModernProtocolVersion = ModernProtocolVersions[0]

/** Every revision served, newest first: `server/discover` and -32022 list these. */
export const ServedProtocolVersions: ReadonlyArray<string> = [...ModernProtocolVersions, ...SupportedProtocolVersions]

/** The only revision that had JSON-RPC batches (2025-06-18 removed them; 2026-07-28 has one message per POST). */
export const BatchProtocolVersion = "2025-03-26"

export const isSupportedProtocolVersion = (version: unknown): version is ProtocolVersion =>
  (SupportedProtocolVersions as ReadonlyArray<unknown>).includes(version)

export const isModernProtocolVersion = (version: unknown): version is ModernProtocolVersion =>
  (ModernProtocolVersions as ReadonlyArray<unknown>).includes(version)

export const isServedProtocolVersion = (version: unknown): boolean =>
  isSupportedProtocolVersion(version) || isModernProtocolVersion(version)

export const negotiateProtocolVersion = (requested: unknown): ProtocolVersion =>
  isSupportedProtocolVersion(requested) ? requested : LatestProtocolVersion

export const MetaKeys = {
  protocolVersion: "io.modelcontextprotocol/protocolVersion",
  clientCapabilities: "io.modelcontextprotocol/clientCapabilities",
  clientInfo: "io.modelcontextprotocol/clientInfo",
  serverInfo: "io.modelcontextprotocol/serverInfo"
} as const

/** The request headers this module reads, by lower-case name (as Node hands them over). */
export type Headers = Readonly<Record<string, string | undefined>>

/** What a 2026-07-28 request declared about its client in `_meta`. */
export interface RequestMeta {
  readonly protocolVersion: ModernProtocolVersion
  readonly clientCapabilities: Readonly<Record<string, unknown>>
  readonly clientInfo: { readonly name: string; readonly version: string } | undefined
}

export type Route =
  /** Served as today: 2025 semantics (initialize, ping, tools, batches when the revision had them). */
  | { readonly _tag: "Legacy" }
  /** A single 2026-07-28 request whose headers and metadata passed every check. */
  | { readonly _tag: "Modern"; readonly id: JsonRpc.RequestId; readonly method: string; readonly params: JsonRpc.Params | undefined; readonly meta: RequestMeta }
  /** A 2026-07-28 notification: accepted (202) and dropped; the revision defines none a client sends over HTTP. */
  | { readonly _tag: "ModernNotification" }
  /** Refused before any method runs. */
  | { readonly _tag: "Refused"; readonly status: 400 | 404; readonly response: JsonRpc.Response }

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const isOws = (code: number) => code === 0x20 || code === 0x09

/**
 * RFC 9110 optional whitespace (spaces, tabs) around a field value is not part of it. Node's parser strips
 * it already, so a value is nearly always returned as it is, after looking at its two ends.
 */
export const withoutOws = (value: string): string =>
  value.length === 0 || (!isOws(value.charCodeAt(0)) && !isOws(value.charCodeAt(value.length - 1)))
    ? value
    : value.replace(/^[ \t]+|[ \t]+$/g, "")

const headerValue = (headers: Headers, name: string): string | undefined => {
  const value = headers[name]
  return value === undefined ? undefined : withoutOws(value)
}

const refuse = (status: 400 | 404, id: JsonRpc.RequestId | null, error: JsonRpc.ErrorObject): Route =>
  ({ _tag: "Refused", status, response: JsonRpc.failure(id, error) })

/** Quoted for an error message as the revision's examples quote ('foo'), never longer than an error message should be. */
const quote = (value: string) => `'${(value.length > 100 ? `${value.slice(0, 100)}…` : value).replace(/[\u0000-\u001f\u007f]/g, "?")}'`

/** -32022 with the served versions, as revision 2026-07-28 words it (HTTP 400). */
export const unsupportedVersion = (id: JsonRpc.RequestId | null, requested: string): Route =>
  refuse(400, id, {
    code: JsonRpc.ErrorCode.UnsupportedProtocolVersion,
    message: `Unsupported protocol version: ${quote(requested)} is not served here; use one of ${ServedProtocolVersions.join(", ")}.`,
    data: { supported: ServedProtocolVersions, requested: requested.slice(0, 100) }
  })

/** -32020 (HTTP 400): a header that is missing, malformed or says something else than the body. */
const headerMismatch = (id: JsonRpc.RequestId | null, message: string, header: string): Route =>
  refuse(400, id, { code: JsonRpc.ErrorCode.HeaderMismatch, message: `Header mismatch: ${message}`, data: { header } })

/** -32602 (HTTP 400): the per-request metadata is missing or malformed. */
const invalidMeta = (id: JsonRpc.RequestId, key: string, problem: string): Route =>
  refuse(400, id, {
    code: JsonRpc.ErrorCode.InvalidParams,
    message: `Invalid params: _meta ${quote(key)} ${problem}.`,
    data: { pointer: `/params/_meta/${key.replace(/~/g, "~0").replace(/\//g, "~1")}` }
  })

/** -32600 (HTTP 400). */
const invalidRequest = (id: JsonRpc.RequestId | null, detail: string): Route =>
  ({ _tag: "Refused", status: 400, response: JsonRpc.invalidRequest(id, detail) })

const Base64Sentinel = /^=\?base64\?([A-Za-z0-9+/]*={0,2})\?=$/
const strictUtf8 = new TextDecoder("utf-8", { fatal: true })

/**
 * An `Mcp-Name` value as the client meant it: `=?base64?…?=` is Base64 of UTF-8 (the revision's value
 * encoding), anything else is the value itself. Undefined for a sentinel that does not decode.
 */
export const decodeHeaderValue = (value: string): string | undefined => {
  if (!value.startsWith("=?base64?")) return value
  const match = Base64Sentinel.exec(value)
  if (match === null || match[1]!.length % 4 !== 0) return undefined
  try {
    return strictUtf8.decode(Buffer.from(match[1]!, "base64"))
  } catch {
    return undefined
  }
}

/** The methods whose `Mcp-Name` header mirrors a body field, and which field. */
const NameSource: Readonly<Record<string, "name" | "uri">> = { "tools/call": "name", "prompts/get": "name", "resources/read": "uri" }

const metaOf = (params: JsonRpc.Params | undefined): Record<string, unknown> | undefined =>
  isRecord(params) && isRecord(params._meta) ? params._meta : undefined

/** Whether a message claims the per-request metadata of revision 2026-07-28 (its `_meta` holds the protocol-version key). */
const claimOf = (message: JsonRpc.Message): { readonly version: unknown } | undefined => {
  if (message._tag !== "Request" && message._tag !== "Notification") return undefined
  const meta = metaOf(message.params)
  return meta !== undefined && Object.hasOwn(meta, MetaKeys.protocolVersion) ? { version: meta[MetaKeys.protocolVersion] } : undefined
}

/**
 * A single request → its route. Order of the checks (the earliest failing one answers): the protocol
 * version (header against body: -32020; not served: -32022), the rest of `_meta` (-32602), the
 * `Mcp-Method` and `Mcp-Name` headers (-32020). All of these answer HTTP 400; an unknown method answers
 * -32601 with HTTP 404, from the dispatcher.
 */
const routeRequest = (request: Extract<JsonRpc.Message, { _tag: "Request" }>, headers: Headers, headerVersion: string | undefined): Route => {
  const { id, method, params } = request
  const meta = metaOf(params)
  if (meta === undefined || !Object.hasOwn(meta, MetaKeys.protocolVersion)) {
    // No claim in the body: a 2025 request, unless the header names a stateless revision.
    if (headerVersion === undefined || isSupportedProtocolVersion(headerVersion)) return { _tag: "Legacy" }
    if (!isModernProtocolVersion(headerVersion)) return unsupportedVersion(id, headerVersion)
    if (method === "initialize") {
      return headerMismatch(id, `initialize is the 2025 handshake, but MCP-Protocol-Version names ${headerVersion}, which has none.`, "MCP-Protocol-Version")
    }
    return invalidMeta(id, MetaKeys.protocolVersion, `is required: MCP-Protocol-Version names ${headerVersion}, whose requests carry their version in _meta`)
  }
  const claimed = meta[MetaKeys.protocolVersion]
  if (typeof claimed !== "string") return invalidMeta(id, MetaKeys.protocolVersion, "must be a string")
  if (headerVersion !== undefined && headerVersion !== claimed) {
    return headerMismatch(id, `MCP-Protocol-Version header value ${quote(headerVersion)} does not match body value ${quote(claimed)}.`, "MCP-Protocol-Version")
  }
  if (!isModernProtocolVersion(claimed)) {
    // A 2025 version in _meta: served as that revision, whose requests need no metadata.
    return isSupportedProtocolVersion(claimed) ? { _tag: "Legacy" } : unsupportedVersion(id, claimed)
  }
  const capabilities = meta[MetaKeys.clientCapabilities]
  if (capabilities === undefined) return invalidMeta(id, MetaKeys.clientCapabilities, "is required (an empty object declares no optional capability)")
  if (!isRecord(capabilities)) return invalidMeta(id, MetaKeys.clientCapabilities, "must be an object")
  const info = meta[MetaKeys.clientInfo]
  if (info !== undefined && !(isRecord(info) && typeof info.name === "string" && typeof info.version === "string")) {
    return invalidMeta(id, MetaKeys.clientInfo, "must be an object with a string name and a string version")
  }
  if (headerVersion === undefined) {
    return headerMismatch(id, `the MCP-Protocol-Version header is required (body value ${quote(claimed)}).`, "MCP-Protocol-Version")
  }
  const methodHeader = headerValue(headers, "mcp-method")
  if (methodHeader === undefined) return headerMismatch(id, `the Mcp-Method header is required (body value ${quote(method)}).`, "Mcp-Method")
  if (methodHeader !== method) {
    return headerMismatch(id, `Mcp-Method header value ${quote(methodHeader)} does not match body value ${quote(method)}.`, "Mcp-Method")
  }
  const source = Object.hasOwn(NameSource, method) ? NameSource[method] : undefined
  if (source !== undefined && isRecord(params)) {
    const bodyName = params[source]
    const nameHeader = headerValue(headers, "mcp-name")
    if (nameHeader === undefined) {
      // Without a body value the params are wrong, which the method itself answers (-32602).
      if (typeof bodyName === "string") return headerMismatch(id, `the Mcp-Name header is required (body value ${quote(bodyName)}).`, "Mcp-Name")
    } else {
      const decoded = decodeHeaderValue(nameHeader)
      if (decoded === undefined) return headerMismatch(id, `Mcp-Name header value ${quote(nameHeader)} is not valid =?base64?…?= encoding.`, "Mcp-Name")
      if (typeof bodyName === "string" && decoded !== bodyName) {
        return headerMismatch(id, `Mcp-Name header value ${quote(decoded)} does not match body value ${quote(bodyName)}.`, "Mcp-Name")
      }
    }
  }
  return {
    _tag: "Modern",
    id,
    method,
    params,
    meta: {
      protocolVersion: claimed,
      clientCapabilities: capabilities,
      clientInfo: info === undefined ? undefined : { name: (info as { name: string }).name, version: (info as { version: string }).version }
    }
  }
}

/**
 * A parsed POST body and its headers → how to serve it. Batches are a 2025-03-26 feature: an array is
 * served only when the request names that revision or no revision at all (a client too old to send
 * `MCP-Protocol-Version` is treated as 2025-03-26, as the transport allows); otherwise, or when an
 * element claims 2026-07-28 metadata, it is -32600 with HTTP 400, as the official SDK answers.
 */
export const route = (envelope: JsonRpc.Envelope, headers: Headers): Route => {
  const headerVersion = headerValue(headers, "mcp-protocol-version")
  switch (envelope._tag) {
    case "Unparseable":
    case "EmptyBatch":
      return { _tag: "Legacy" }
    case "Batch": {
      if (headerVersion !== undefined && !isServedProtocolVersion(headerVersion)) return unsupportedVersion(null, headerVersion)
      if (headerVersion !== undefined && headerVersion !== BatchProtocolVersion) {
        return invalidRequest(null, `JSON-RPC batches (arrays) belong to protocol revision ${BatchProtocolVersion} only; revision ${headerVersion} takes one message per POST.`)
      }
      if (envelope.messages.some((message) => {
        const claim = claimOf(message)
        return claim !== undefined && !isSupportedProtocolVersion(claim.version)
      })) {
        return invalidRequest(null, `a batch may not hold requests of protocol revision ${ModernProtocolVersion} (one message per POST).`)
      }
      return { _tag: "Legacy" }
    }
    case "Single": {
      const message = envelope.message
      switch (message._tag) {
        case "Request":
          return routeRequest(message, headers, headerVersion)
        case "Invalid":
          return { _tag: "Legacy" }
        case "Notification":
        case "ClientResponse": {
          const claimed = claimOf(message)?.version
          if (typeof claimed === "string" && headerVersion !== undefined && headerVersion !== claimed) {
            return headerMismatch(null, `MCP-Protocol-Version header value ${quote(headerVersion)} does not match body value ${quote(claimed)}.`, "MCP-Protocol-Version")
          }
          const version = typeof claimed === "string" ? claimed : headerVersion
          if (version !== undefined && !isServedProtocolVersion(version)) return unsupportedVersion(null, version)
          if (!isModernProtocolVersion(version)) return { _tag: "Legacy" }
          return message._tag === "Notification"
            ? { _tag: "ModernNotification" }
            : invalidRequest(null, `revision ${version} has no server-to-client requests, so a client never posts a response.`)
        }
      }
    }
  }
}
