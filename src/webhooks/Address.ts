/**
 * Where the service may send a webhook: the SSRF rules. A subscriber chooses the URL, so without these
 * rules the service would POST on their behalf to its own loopback, the cloud metadata address
 * (169.254.169.254), or the private network it runs in.
 *
 * Three checks, at three moments:
 * - `checkWebhookUrl`: the URL's syntax, and the host when it is an IP literal (no DNS), when a
 *   subscription is written;
 * - `resolveWebhookUrl`: every address the name resolves to, also when it is written, so a subscriber
 *   learns at once that `https://localhost/…` will never be delivered to;
 * - `guardedLookup` and the connected socket's `remoteAddress` (src/webhooks/Send.ts), at every
 *   delivery: DNS answers change (rebinding), so the address actually connected to is what counts.
 *
 * `allowPrivate` (a deployment's own test receivers on loopback or a private network) turns all of it off.
 */
import { lookup as dnsLookup, promises as dnsPromises, type LookupAddress, type LookupOptions } from "node:dns"
import { isIP } from "node:net"

export type AddressClass =
  | "public"
  | "loopback"
  | "private"
  | "link-local"
  | "unique-local"
  | "shared"
  | "multicast"
  | "unspecified"
  | "reserved"

/** An IPv4 range: first address as a 32-bit number and prefix length. */
type Range4 = readonly [network: string, prefix: number, cls: AddressClass]

/**
 * Not "public", by IANA's special-purpose registry. The documentation, benchmarking and protocol
 * assignment blocks are refused too ("reserved"): nobody legitimately receives webhooks there.
 */
const ipv4Ranges: ReadonlyArray<Range4> = [
  ["0.0.0.0", 8, "unspecified"],
  ["10.0.0.0", 8, "private"],
  ["100.64.0.0", 10, "shared"],
  ["127.0.0.0", 8, "loopback"],
  ["169.254.0.0", 16, "link-local"],
  ["172.16.0.0", 12, "private"],
  ["192.0.0.0", 24, "reserved"],
  ["192.0.2.0", 24, "reserved"],
  ["192.88.99.0", 24, "reserved"],
  ["192.168.0.0", 16, "private"],
  ["198.18.0.0", 15, "reserved"],
  ["198.51.100.0", 24, "reserved"],
  ["203.0.113.0", 24, "reserved"],
  ["224.0.0.0", 4, "multicast"],
  ["240.0.0.0", 4, "reserved"]
]

const ipv4Number = (ip: string): number => {
  const [a, b, c, d] = ip.split(".").map(Number) as [number, number, number, number]
  return ((a << 24) | (b << 16) | (c << 8) | d) >>> 0
}

const maskOf = (prefix: number): number => (prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0)

const compiled4 = ipv4Ranges.map(([network, prefix, cls]) => ({ base: ipv4Number(network), mask: maskOf(prefix), cls }))

const classify4 = (n: number): AddressClass => {
  for (const range of compiled4) if (((n & range.mask) >>> 0) === range.base) return range.cls
  return "public"
}

/**
 * An IPv6 text (already accepted by `isIP`, zone id removed) as its 8 16-bit groups: `::` expanded and a
 * trailing dotted quad (`::ffff:1.2.3.4`) turned into the last two groups.
 */
export const ipv6Groups = (text: string): ReadonlyArray<number> => {
  const groupsOf = (part: string): Array<number> => {
    if (part === "") return []
    const out: Array<number> = []
    for (const piece of part.split(":")) {
      if (piece.includes(".")) {
        const n = ipv4Number(piece)
        out.push(n >>> 16, n & 0xffff)
      } else {
        out.push(parseInt(piece, 16))
      }
    }
    return out
  }
  const double = text.indexOf("::")
  if (double < 0) return groupsOf(text)
  const head = groupsOf(text.slice(0, double))
  const tail = groupsOf(text.slice(double + 2))
  return [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail]
}

/**
 * IPv6 classes. Addresses that carry an IPv4 address a packet may end up at are classed as that
 * IPv4 address, so `::ffff:127.0.0.1` is loopback and `::ffff:10.0.0.1` private:
 * - IPv4-mapped `::ffff:0:0/96` (a dual-stack socket connects to the IPv4 address itself);
 * - IPv4-compatible `::/96` (deprecated; some stacks still route it as IPv4), except `::` and `::1`;
 * - NAT64 `64:ff9b::/96` (a NAT64 gateway forwards to the embedded IPv4 address);
 * - 6to4 `2002::/16` (the embedded IPv4 address is the tunnel end point).
 * Teredo (`2001::/32`), documentation (`2001:db8::/32`), the local-use NAT64 prefix (`64:ff9b:1::/48`),
 * discard-only (`100::/64`), the deprecated site-local `fec0::/10`, and all space outside the global
 * unicast `2000::/3` are "reserved".
 */
const classify6 = (g: ReadonlyArray<number>): AddressClass => {
  const [g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0] = g
  const embedded = ((g6 << 16) | g7) >>> 0
  if (g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0) {
    if (g5 === 0xffff) return classify4(embedded)
    if (g5 === 0) {
      if (g6 === 0 && g7 === 0) return "unspecified"
      if (g6 === 0 && g7 === 1) return "loopback"
      return classify4(embedded)
    }
    return "reserved"
  }
  if (g0 === 0x64 && g1 === 0xff9b) {
    if (g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) return classify4(embedded)
    return "reserved"
  }
  if ((g0 & 0xff00) === 0xff00) return "multicast"
  if ((g0 & 0xfe00) === 0xfc00) return "unique-local"
  if ((g0 & 0xffc0) === 0xfe80) return "link-local"
  if ((g0 & 0xffc0) === 0xfec0) return "reserved"
  if (g0 === 0x2002) return classify4(((g1 << 16) | g2) >>> 0)
  if (g0 === 0x2001 && (g1 === 0 || g1 === 0xdb8)) return "reserved"
  if ((g0 & 0xe000) !== 0x2000) return "reserved"
  return "public"
}

/** Strips one pair of URL brackets and a zone id (`fe80::1%eth0`). */
const bare = (ip: string): string => {
  const unbracketed = ip.startsWith("[") && ip.endsWith("]") ? ip.slice(1, -1) : ip
  const zone = unbracketed.indexOf("%")
  return zone < 0 ? unbracketed : unbracketed.slice(0, zone)
}

/** The class of an IPv4 or IPv6 address text; anything that is not one is "reserved" (refused). */
export const classifyAddress = (ip: string): AddressClass => {
  const text = bare(ip)
  switch (isIP(text)) {
    case 4:
      return classify4(ipv4Number(text))
    case 6:
      return classify6(ipv6Groups(text))
    default:
      return "reserved"
  }
}

/** True when a webhook must not be sent to this address. */
export const isRefused = (ip: string, allowPrivate: boolean): boolean => !allowPrivate && classifyAddress(ip) !== "public"

const classWords: Record<AddressClass, string> = {
  public: "a public address",
  loopback: "a loopback address",
  private: "a private network address",
  "link-local": "a link-local address",
  "unique-local": "a unique local (private) address",
  shared: "a carrier-grade NAT (shared) address",
  multicast: "a multicast address",
  unspecified: "an unspecified address",
  reserved: "a reserved or special-purpose address"
}

/** "127.0.0.1, a loopback address" — for a problem detail. */
export const describeAddress = (ip: string): string => `${ip}, ${classWords[classifyAddress(ip)]}`

export type UrlCheck = { readonly ok: true; readonly url: URL } | { readonly ok: false; readonly reason: string }

/** Longest webhook URL accepted (characters of the text as given). */
export const MaxWebhookUrlLength = 2048

/** `[::1]` → `::1`: a URL's hostname as an address text, or undefined when it is a name. */
export const ipLiteralOf = (hostname: string): string | undefined => {
  const text = hostname.startsWith("[") && hostname.endsWith("]") ? hostname.slice(1, -1) : hostname
  return isIP(text) === 0 ? undefined : text
}

/** RFC 6761: `localhost` and every name under it are loopback whatever a resolver says. */
const isLocalhostName = (hostname: string): boolean => {
  const name = hostname.toLowerCase().replace(/\.$/, "")
  return name === "localhost" || name.endsWith(".localhost")
}

const refused = (reason: string): UrlCheck => ({ ok: false, reason })

/**
 * The URL's syntax and, for an IP literal, its address; no DNS. The WHATWG parser has already
 * normalised every IPv4 spelling (`0x7f.1`, `2130706433`) to dotted decimal and IPv6 to its short form,
 * so the literal checked is the one a request would connect to.
 */
export const checkWebhookUrl = (raw: string, options: { allowHttp: boolean; allowPrivate: boolean }): UrlCheck => {
  if (raw.length > MaxWebhookUrlLength) {
    return refused(`The webhook URL is ${raw.length} characters long; at most ${MaxWebhookUrlLength} are accepted.`)
  }
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return refused("The webhook URL is not an absolute URL.")
  }
  if (url.protocol !== "https:" && !(url.protocol === "http:" && options.allowHttp)) {
    return refused(
      options.allowHttp
        ? `The webhook URL must use https: or http:, not ${url.protocol}`
        : `The webhook URL must use https:, not ${url.protocol}`
    )
  }
  if (url.username !== "" || url.password !== "") {
    return refused("The webhook URL must not contain a user name or password.")
  }
  if (url.hostname === "") return refused("The webhook URL has no host.")
  if (!options.allowPrivate) {
    const literal = ipLiteralOf(url.hostname)
    if (literal !== undefined && isRefused(literal, false)) {
      return refused(`The webhook URL's host is ${describeAddress(literal)}; webhooks are sent to public addresses only.`)
    }
    if (literal === undefined && isLocalhostName(url.hostname)) {
      return refused(`The webhook URL's host ${url.hostname} is a loopback name; webhooks are sent to public addresses only.`)
    }
  }
  return { ok: true, url }
}

/**
 * The check when a subscription is written: the name must resolve, and to public addresses only (every
 * one of them: a name with one private address among public ones is refused, since any may be picked).
 */
export const resolveWebhookUrl = async (url: URL, options: { allowPrivate: boolean }): Promise<UrlCheck> => {
  const literal = ipLiteralOf(url.hostname)
  if (literal !== undefined) {
    return isRefused(literal, options.allowPrivate)
      ? refused(`The webhook URL's host is ${describeAddress(literal)}; webhooks are sent to public addresses only.`)
      : { ok: true, url }
  }
  let addresses: Array<LookupAddress>
  try {
    addresses = await dnsPromises.lookup(url.hostname, { all: true, verbatim: true })
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "unknown error"
    return refused(`The webhook URL's host ${url.hostname} does not resolve (${code}).`)
  }
  if (addresses.length === 0) return refused(`The webhook URL's host ${url.hostname} does not resolve to any address.`)
  const bad = addresses.find((entry) => isRefused(entry.address, options.allowPrivate))
  if (bad !== undefined) {
    return refused(
      `The webhook URL's host ${url.hostname} resolves to ${describeAddress(bad.address)}; webhooks are sent to public addresses only.`
    )
  }
  return { ok: true, url }
}

/** The `code` of the error a guarded lookup or connection fails with. */
export const RefusedAddressCode = "EPV_REFUSED_ADDRESS"

export const refusedAddressError = (hostname: string, address: string): NodeJS.ErrnoException =>
  Object.assign(new Error(`refused address ${address}${hostname === address ? "" : ` (${hostname})`}`), {
    code: RefusedAddressCode,
    address,
    hostname
  })

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | Array<LookupAddress>, family?: number) => void

/**
 * The `lookup` option of `http.request` / `net.connect`: `dns.lookup` that fails with `code`
 * "EPV_REFUSED_ADDRESS" when any resolved address is refused. It answers both call shapes Node uses:
 * `all: true` (the happy-eyeballs connect of Node ≥ 20) with the list, otherwise the first address and
 * its family. It always resolves every address, so a single-address call cannot skip a refused one.
 */
export const guardedLookup = (allowPrivate: boolean) =>
  (hostname: string, options: LookupOptions | number | LookupCallback, callback?: LookupCallback): void => {
    const done: LookupCallback = typeof options === "function" ? options : callback!
    const given: LookupOptions = typeof options === "number" ? { family: options } : typeof options === "function" ? {} : options
    dnsLookup(hostname, { ...given, all: true }, (error, addresses) => {
      if (error !== null) return done(error, given.all === true ? [] : "")
      const bad = addresses.find((entry) => isRefused(entry.address, allowPrivate))
      if (bad !== undefined) return done(refusedAddressError(hostname, bad.address), given.all === true ? [] : "")
      if (given.all === true) return done(null, addresses)
      const first = addresses[0]
      if (first === undefined) {
        return done(Object.assign(new Error(`${hostname} resolves to no address`), { code: "ENOTFOUND" }), "")
      }
      done(null, first.address, first.family)
    })
  }
