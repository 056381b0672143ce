import type { IncomingMessage } from "node:http"
import { BlockList, isIP } from "node:net"
import { Context, Effect, Layer, Option } from "effect"
import type { HttpServerRequest } from "effect/http"
import { AppConfig } from "../platform/Config.js"

/** `::ffff:192.0.2.1` is the IPv4 client 192.0.2.1 on a dual-stack socket. */
const normalise = (address: string): string => {
  const lower = address.trim().toLowerCase()
  return lower.startsWith("::ffff:") && isIP(lower.slice(7)) === 4 ? lower.slice(7) : lower
}

/** The CIDR list of PV_TRUSTED_PROXIES as a BlockList (entries were validated by the config). */
export const trustedProxyList = (cidrs: ReadonlyArray<string>): BlockList => {
  const list = new BlockList()
  for (const entry of cidrs) {
    const [address = "", bits] = entry.split("/")
    const family = isIP(address) === 6 ? "ipv6" : "ipv4"
    if (bits === undefined) list.addAddress(normalise(address), family)
    else list.addSubnet(normalise(address), Number(bits), family)
  }
  return list
}

const isTrusted = (list: BlockList, address: string): boolean => {
  const family = isIP(address)
  return family !== 0 && list.check(address, family === 6 ? "ipv6" : "ipv4")
}

/** The node of an RFC 7239 `for=` value: unquoted, without brackets and port. */
const forwardedNode = (value: string): string => {
  const unquoted = value.trim().replace(/^"(.*)"$/, "$1")
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(unquoted)
  if (bracketed) return bracketed[1]!
  const v4WithPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d+$/.exec(unquoted)
  return v4WithPort ? v4WithPort[1]! : unquoted
}

/**
 * The hops a proxy chain reports, client first: X-Forwarded-For when present (what most proxies
 * maintain), else RFC 7239 `Forwarded`. The trusted proxy must append to the header it reads.
 */
const reportedHops = (headers: Readonly<Record<string, string | undefined>>): Array<string> => {
  const xff = headers["x-forwarded-for"]
  if (xff !== undefined) return xff.split(",").map((hop) => hop.trim()).filter((hop) => hop.length > 0)
  const forwarded = headers["forwarded"]
  if (forwarded !== undefined) {
    return forwarded.split(",").flatMap((element) =>
      element.split(";").flatMap((pair) => {
        const eq = pair.indexOf("=")
        return eq !== -1 && pair.slice(0, eq).trim().toLowerCase() === "for" ? [forwardedNode(pair.slice(eq + 1))] : []
      })
    )
  }
  return []
}

/**
 * docs/API.md §3.7: the socket peer, unless the peer is a trusted proxy; then the right-most reported
 * hop that is not itself a trusted proxy (each proxy appends the address it saw, so everything left of
 * the last untrusted hop may be forged by the client), if it is an IP address (else the peer). With
 * every hop trusted, the left-most one.
 */
export const resolveClientAddress = (
  peer: string | undefined,
  headers: Readonly<Record<string, string | undefined>>,
  trusted: BlockList | undefined
): string => {
  const socketPeer = peer === undefined ? "unknown" : normalise(peer)
  if (trusted === undefined || !isTrusted(trusted, socketPeer)) return socketPeer
  const hops = reportedHops(headers).map(normalise)
  for (let i = hops.length - 1; i >= 0; i--) {
    // A trusted proxy writes the address it saw; anything else there was not written by it.
    if (!isTrusted(trusted, hops[i]!)) return isIP(hops[i]!) !== 0 ? hops[i]! : socketPeer
  }
  return hops[0] ?? socketPeer
}

/** The address every per-address limit counts against. */
export class ClientAddresses extends Context.Service<ClientAddresses, {
  readonly of: (request: HttpServerRequest.HttpServerRequest) => string
  /** The same for a request the front door answers itself (log/FastReads.ts). */
  readonly ofNode: (request: IncomingMessage) => string
}>()("pv/ClientAddresses") {
  /** Needs AppConfig (PV_TRUSTED_PROXIES). */
  static readonly layer = Layer.effect(
    ClientAddresses,
    Effect.map(AppConfig, (config) => {
      const trusted = config.trustedProxies.length > 0 ? trustedProxyList(config.trustedProxies) : undefined
      return ClientAddresses.of({
        of: (request) => resolveClientAddress(Option.getOrUndefined(request.remoteAddress), request.headers, trusted),
        ofNode: (request) => resolveClientAddress(request.socket.remoteAddress, request.headers as Readonly<Record<string, string | undefined>>, trusted)
      })
    })
  )
}
