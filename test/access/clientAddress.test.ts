import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { resolveClientAddress, trustedProxyList } from "../../src/access/ClientAddress.js"

const trusted = trustedProxyList(["10.0.0.0/8", "127.0.0.1", "2001:db8:ffff::/48"])
const publicV4 = fc.tuple(fc.integer({ min: 11, max: 99 }), fc.nat(255), fc.nat(255), fc.integer({ min: 1, max: 254 }))
  .map(([a, b, c, d]) => `${a}.${b}.${c}.${d}`)
const proxyV4 = fc.tuple(fc.nat(255), fc.nat(255), fc.integer({ min: 1, max: 254 })).map(([b, c, d]) => `10.${b}.${c}.${d}`)
const junk = fc.oneof(fc.string(), fc.constantFrom("unknown", "_hidden", "999.1.1.1", "::ffff:zz", ""))

describe("client address (docs/API.md §3.7)", () => {
  it("is the socket peer whenever the peer is not a trusted proxy, whatever the headers say", () => {
    fc.assert(fc.property(publicV4, fc.array(fc.oneof(publicV4, proxyV4, junk)), (peer, hops) => {
      expect(resolveClientAddress(peer, { "x-forwarded-for": hops.join(", "), forwarded: `for=${hops[0] ?? ""}` }, trusted)).toBe(peer)
    }))
  })

  it("behind trusted proxies, is the address the last proxy saw: hops a client prepends change nothing", () => {
    fc.assert(fc.property(fc.array(fc.oneof(publicV4, proxyV4, junk)), publicV4, fc.array(proxyV4, { maxLength: 3 }), (forged, client, proxies) => {
      // Each trusted proxy appends the address it saw: the client's, then each earlier proxy's.
      const header = [...forged, client, ...proxies].join(", ")
      expect(resolveClientAddress("127.0.0.1", { "x-forwarded-for": header }, trusted)).toBe(client)
      expect(resolveClientAddress("::ffff:10.1.2.3", { "x-forwarded-for": header }, trusted)).toBe(client)
    }))
  })

  it("falls back to the peer when the hop the proxy should have written is not an address", () => {
    fc.assert(fc.property(junk.filter((s) => s.trim() !== "" && !s.includes(",")), (hop) => {
      expect(resolveClientAddress("10.0.0.1", { "x-forwarded-for": hop }, trusted)).toBe("10.0.0.1")
    }))
  })

  it("reads RFC 7239 Forwarded (quoted IPv6 with port, IPv4 with port) when X-Forwarded-For is absent", () => {
    expect(resolveClientAddress("10.0.0.1", { forwarded: 'for="[2001:db8::7]:4711";proto=https, for=10.0.0.9' }, trusted)).toBe("2001:db8::7")
    expect(resolveClientAddress("10.0.0.1", { forwarded: "for=203.0.113.9:80" }, trusted)).toBe("203.0.113.9")
    // X-Forwarded-For wins when both are present: the proxy is expected to maintain that one.
    expect(resolveClientAddress("10.0.0.1", { forwarded: "for=198.51.100.1", "x-forwarded-for": "203.0.113.5" }, trusted)).toBe("203.0.113.5")
  })

  it("without trusted proxies, or with every hop trusted, stays on what the network shows", () => {
    expect(resolveClientAddress("127.0.0.1", { "x-forwarded-for": "203.0.113.5" }, undefined)).toBe("127.0.0.1")
    expect(resolveClientAddress("127.0.0.1", { "x-forwarded-for": "10.0.0.2, 10.0.0.3" }, trusted)).toBe("10.0.0.2")
    expect(resolveClientAddress(undefined, {}, trusted)).toBe("unknown")
  })
})
