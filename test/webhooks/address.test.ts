import { BlockList } from "node:net"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import {
  checkWebhookUrl,
  classifyAddress,
  guardedLookup,
  isRefused,
  RefusedAddressCode,
  resolveWebhookUrl,
  type AddressClass
} from "../../src/webhooks/Address.js"

// The rules as a table, written independently of src/webhooks/Address.ts (IANA special-purpose registries).
const v4Ranges: ReadonlyArray<readonly [string, number, AddressClass]> = [
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

const v4Text = (n: number): string => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".")
const v4Number = (text: string): number => text.split(".").reduce((acc, part) => acc * 256 + Number(part), 0)

const inV4 = (network: string, prefix: number): fc.Arbitrary<number> =>
  fc.integer({ min: 0, max: 2 ** (32 - prefix) - 1 }).map((offset) => v4Number(network) + offset)

/** Node's own BlockList as a second oracle for "refused or not". */
const blocked = new BlockList()
for (const [network, prefix] of v4Ranges) blocked.addSubnet(network, prefix, "ipv4")

const anyV4 = fc.integer({ min: 0, max: 0xffffffff })
const publicV4 = anyV4.filter((n) => !blocked.check(v4Text(n), "ipv4"))

// IPv6: an address is a 128-bit bigint; its texts are generated here in every spelling a parser must accept.
const mask128 = (1n << 128n) - 1n
const anyV6 = fc.bigInt({ min: 0n, max: mask128 })
const inV6 = (network: bigint, prefix: number): fc.Arbitrary<bigint> =>
  anyV6.map((random) => {
    const keep = prefix === 0 ? 0n : (mask128 << BigInt(128 - prefix)) & mask128
    return (network & keep) | (random & ~keep & mask128)
  })
const groupsOf = (n: bigint): Array<number> => Array.from({ length: 8 }, (_, i) => Number((n >> BigInt(112 - 16 * i)) & 0xffffn))
const v6 = (text: string): bigint => {
  // Only for the literal networks below: full groups or a single "::" in them.
  const [head = "", tail] = text.split("::")
  const h = head === "" ? [] : head.split(":")
  const t = tail === undefined || tail === "" ? [] : tail.split(":")
  const all = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill("0"), ...t]
  return all.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n)
}

/** Compress the zero run starting at `from` of length `length` (≥ 1) to "::". */
const compressed = (groups: ReadonlyArray<string>, from: number, length: number): string =>
  `${groups.slice(0, from).join(":")}::${groups.slice(from + length).join(":")}`

const spellings = (n: bigint): fc.Arbitrary<string> => {
  const groups = groupsOf(n)
  const plain = groups.map((g) => g.toString(16))
  const variants: Array<string> = [plain.join(":"), groups.map((g) => g.toString(16).padStart(4, "0")).join(":")]
  // Every run of zero groups may be the one "::" stands for.
  for (let from = 0; from < 8; from++) {
    for (let length = 1; from + length <= 8 && groups[from + length - 1] === 0; length++) variants.push(compressed(plain, from, length))
  }
  // The last 32 bits as a dotted quad.
  const quad = v4Text(Number(n & 0xffffffffn))
  variants.push(`${plain.slice(0, 6).join(":")}:${quad}`)
  for (let from = 0; from < 6; from++) {
    for (let length = 1; from + length <= 6 && groups[from + length - 1] === 0; length++) {
      const head = compressed(plain.slice(0, 6), from, length)
      variants.push(head.endsWith("::") ? `${head}${quad}` : `${head}:${quad}`)
    }
  }
  return fc.constantFrom(...variants).chain((text) => fc.constantFrom(text, text.toUpperCase(), `[${text}]`, `${text}%eth0`))
}

const v6Ranges: ReadonlyArray<readonly [string, number, AddressClass]> = [
  ["fc00::", 7, "unique-local"],
  ["fe80::", 10, "link-local"],
  ["ff00::", 8, "multicast"],
  ["fec0::", 10, "reserved"],
  ["2001:db8::", 32, "reserved"],
  ["2001::", 32, "reserved"],
  ["100::", 64, "reserved"],
  ["64:ff9b:1::", 48, "reserved"],
  ["4000::", 2, "reserved"],
  // Unassigned space: outside 2000::/3 and the blocks above.
  ["8000::", 2, "reserved"],
  ["c000::", 3, "reserved"],
  ["e000::", 4, "reserved"],
  ["f000::", 5, "reserved"],
  ["f800::", 6, "reserved"],
  ["fe00::", 9, "reserved"]
]

/** What the IPv4 class of an embedded address is, by the independent table. */
const v4Class = (n: number): AddressClass => {
  for (const [network, prefix, cls] of v4Ranges) {
    if (Math.floor(n / 2 ** (32 - prefix)) === Math.floor(v4Number(network) / 2 ** (32 - prefix))) return cls
  }
  return "public"
}

describe("classifyAddress: IPv4", () => {
  for (const [network, prefix, cls] of v4Ranges) {
    it(`${network}/${prefix} is ${cls}`, () => {
      fc.assert(fc.property(inV4(network, prefix), (n) => {
        expect(classifyAddress(v4Text(n))).toBe(cls)
        expect(isRefused(v4Text(n), false)).toBe(true)
        expect(isRefused(v4Text(n), true)).toBe(false)
      }), { numRuns: 200 })
    })
  }

  it("255.255.255.255 is reserved, and the edges of each range are inside it and their neighbours outside", () => {
    expect(classifyAddress("255.255.255.255")).toBe("reserved")
    expect(classifyAddress("169.254.169.254")).toBe("link-local")
    expect(classifyAddress("172.15.255.255")).toBe("public")
    expect(classifyAddress("172.32.0.0")).toBe("public")
    expect(classifyAddress("100.63.255.255")).toBe("public")
    expect(classifyAddress("100.128.0.0")).toBe("public")
    expect(classifyAddress("223.255.255.255")).toBe("public")
    expect(classifyAddress("1.0.0.0")).toBe("public")
  })

  it("every address outside all ranges is public (Node's BlockList agrees on which are refused)", () => {
    fc.assert(fc.property(publicV4, (n) => {
      expect(classifyAddress(v4Text(n))).toBe("public")
      expect(isRefused(v4Text(n), false)).toBe(false)
    }), { numRuns: 2000 })
    fc.assert(fc.property(anyV4, (n) => {
      expect(classifyAddress(v4Text(n)) !== "public").toBe(blocked.check(v4Text(n), "ipv4"))
    }), { numRuns: 5000 })
  })
})

describe("classifyAddress: IPv6", () => {
  it("::1 is loopback and :: unspecified, in every spelling", () => {
    for (const text of ["::1", "0:0:0:0:0:0:0:1", "0000:0000:0000:0000:0000:0000:0000:0001", "[::1]", "::1%lo"]) {
      expect(classifyAddress(text), text).toBe("loopback")
    }
    for (const text of ["::", "0:0:0:0:0:0:0:0", "0::0", "[::]"]) expect(classifyAddress(text), text).toBe("unspecified")
  })

  for (const [network, prefix, cls] of v6Ranges) {
    it(`${network}/${prefix} is ${cls}, in every spelling`, () => {
      fc.assert(fc.property(inV6(v6(network), prefix).chain((n) => spellings(n)), (text) => {
        expect(classifyAddress(text)).toBe(cls)
        expect(isRefused(text, false)).toBe(true)
        expect(isRefused(text, true)).toBe(false)
      }), { numRuns: 300 })
    })
  }

  // Mapped ::ffff:0:0/96, compatible ::/96 (past :: and ::1), NAT64 64:ff9b::/96: the embedded IPv4 address decides.
  for (const [name, network] of [["IPv4-mapped", 0xffff_0000_0000n], ["IPv4-compatible", 0n], ["NAT64", v6("64:ff9b::")]] as const) {
    it(`${name} addresses are classed as the embedded IPv4 address, dotted or hex`, () => {
      const embedded = fc.oneof(anyV4, publicV4, ...v4Ranges.map(([net, prefix]) => inV4(net, prefix))).filter((n) => network !== 0n || n > 1)
      fc.assert(fc.property(embedded.chain((n) => spellings(network | BigInt(n)).map((text) => [n, text] as const)), ([n, text]) => {
        expect(classifyAddress(text)).toBe(v4Class(n))
      }), { numRuns: 1000 })
    })
  }

  it("the mapped forms a URL parser produces are refused: ::ffff:7f00:1 and ::ffff:a9fe:a9fe", () => {
    expect(classifyAddress("::ffff:7f00:1")).toBe("loopback")
    expect(classifyAddress("::ffff:127.0.0.1")).toBe("loopback")
    expect(classifyAddress("::FFFF:A9FE:A9FE")).toBe("link-local")
    expect(classifyAddress("::ffff:8.8.8.8")).toBe("public")
    expect(classifyAddress("64:ff9b::10.1.2.3")).toBe("private")
    expect(classifyAddress("::127.0.0.1")).toBe("loopback")
  })

  it("6to4 (2002::/16) is classed as the IPv4 address in its second and third groups", () => {
    fc.assert(fc.property(anyV4, anyV6, (n, random) => {
      const address = (0x2002n << 112n) | (BigInt(n) << 80n) | (random & ((1n << 80n) - 1n))
      expect(classifyAddress(groupsOf(address).map((g) => g.toString(16)).join(":"))).toBe(v4Class(n))
    }), { numRuns: 1000 })
  })

  it("global unicast 2000::/3 outside the special blocks is public, in every spelling", () => {
    const special = (n: bigint) => n >> 96n === 0x2001_0000n || n >> 96n === 0x2001_0db8n || n >> 112n === 0x2002n
    fc.assert(fc.property(inV6(v6("2000::"), 3).filter((n) => !special(n)).chain((n) => spellings(n)), (text) => {
      expect(classifyAddress(text)).toBe("public")
      expect(isRefused(text, false)).toBe(false)
    }), { numRuns: 2000 })
  })

  it("anything that is not an address is reserved (refused)", () => {
    for (const text of ["", "localhost", "1.2.3", "1.2.3.4.5", "256.1.1.1", "01.2.3.4", "::ffff::1", "1:2:3:4:5:6:7:8:9", "gggg::1", "example.com"]) {
      expect(classifyAddress(text), text).toBe("reserved")
      expect(isRefused(text, false), text).toBe(true)
    }
    fc.assert(fc.property(fc.string(), (text) => {
      const cls = classifyAddress(text)
      expect(cls).toBeTypeOf("string")
    }))
  })
})

const strict = { allowHttp: false, allowPrivate: false }

describe("checkWebhookUrl", () => {
  it("accepts an https URL with a public name or address", () => {
    for (const raw of ["https://hooks.example.com/pv", "https://8.8.8.8:8443/x?y=1", "https://[2606:4700::1111]/in", "https://example.com"]) {
      const check = checkWebhookUrl(raw, strict)
      expect(check.ok, raw).toBe(true)
      if (check.ok) expect(check.url.href).toBe(new URL(raw).href)
    }
  })

  it("refuses any user name or password", () => {
    const part = fc.stringMatching(/^[A-Za-z0-9._~-]{1,12}$/)
    fc.assert(fc.property(part, fc.option(part), fc.boolean(), (user, password, allowHttp) => {
      const raw = `https://${user}${password === null ? "" : `:${password}`}@hooks.example.com/in`
      const check = checkWebhookUrl(raw, { allowHttp, allowPrivate: true })
      expect(check.ok).toBe(false)
      if (!check.ok) expect(check.reason).toMatch(/user name or password/)
    }))
    expect(checkWebhookUrl("https://:secret@hooks.example.com/", strict).ok).toBe(false)
  })

  it("refuses more than 2048 characters and accepts exactly 2048", () => {
    const base = "https://hooks.example.com/"
    fc.assert(fc.property(fc.integer({ min: 2049, max: 20000 }), (length) => {
      const check = checkWebhookUrl(base + "a".repeat(length - base.length), strict)
      expect(check.ok).toBe(false)
      if (!check.ok) expect(check.reason).toMatch(/at most 2048/)
    }), { numRuns: 50 })
    expect(checkWebhookUrl(base + "a".repeat(2048 - base.length), strict).ok).toBe(true)
  })

  it("refuses http: unless allowed, and every other scheme always", () => {
    fc.assert(fc.property(fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/), fc.boolean(), (label, allowHttp) => {
      const http = checkWebhookUrl(`http://${label}.example.com/in`, { allowHttp, allowPrivate: false })
      expect(http.ok).toBe(allowHttp)
      if (!http.ok) expect(http.reason).toMatch(/must use https:/)
      expect(checkWebhookUrl(`https://${label}.example.com/in`, { allowHttp, allowPrivate: false }).ok).toBe(true)
    }))
    for (const raw of ["ftp://example.com/", "file:///etc/passwd", "javascript:alert(1)", "ws://example.com/", "data:,x"]) {
      expect(checkWebhookUrl(raw, { allowHttp: true, allowPrivate: true }).ok, raw).toBe(false)
    }
  })

  it("refuses what is not an absolute URL", () => {
    for (const raw of ["", "hooks.example.com/in", "/in", "https://", "https://exa mple.com/", "http://[::1/"]) {
      const check = checkWebhookUrl(raw, strict)
      expect(check.ok, raw).toBe(false)
    }
  })

  it("refuses a refused IP literal in any spelling the URL parser normalises, unless private addresses are allowed", () => {
    const refusedHosts = [
      "127.0.0.1", "0x7f.1", "2130706433", "0177.0.0.1", "169.254.169.254", "10.1.2.3", "[::1]", "[::ffff:127.0.0.1]",
      "[0:0:0:0:0:ffff:7f00:1]", "[fd00::1]", "[fe80::1]", "0.0.0.0", "localhost", "LOCALHOST.", "api.localhost", "[64:ff9b::a00:1]"
    ]
    for (const host of refusedHosts) {
      const check = checkWebhookUrl(`https://${host}:8443/in`, strict)
      expect(check.ok, host).toBe(false)
      if (!check.ok) expect(check.reason, host).toMatch(/public addresses only/)
      expect(checkWebhookUrl(`https://${host}:8443/in`, { allowHttp: false, allowPrivate: true }).ok, host).toBe(true)
    }
    fc.assert(fc.property(fc.constantFrom(...v4Ranges).chain(([net, prefix]) => inV4(net, prefix)), (n) => {
      expect(checkWebhookUrl(`https://${v4Text(n)}/`, strict).ok).toBe(false)
      expect(checkWebhookUrl(`https://[::ffff:${v4Text(n)}]/`, strict).ok).toBe(false)
    }))
    fc.assert(fc.property(publicV4, (n) => {
      expect(checkWebhookUrl(`https://${v4Text(n)}/`, strict).ok).toBe(true)
    }))
  })
})

describe("resolveWebhookUrl", () => {
  it("refuses localhost through DNS (every address it resolves to is loopback) unless private addresses are allowed", async () => {
    const check = await resolveWebhookUrl(new URL("https://localhost:8443/in"), { allowPrivate: false })
    expect(check.ok).toBe(false)
    if (!check.ok) expect(check.reason).toMatch(/^The webhook URL's host localhost resolves to (127\.0\.0\.1|::1), a loopback address/)
    expect((await resolveWebhookUrl(new URL("https://localhost:8443/in"), { allowPrivate: true })).ok).toBe(true)
  })

  it("refuses IP literals without DNS, and a name that does not resolve", async () => {
    expect((await resolveWebhookUrl(new URL("https://[::ffff:10.0.0.1]/"), { allowPrivate: false })).ok).toBe(false)
    expect((await resolveWebhookUrl(new URL("https://8.8.8.8/"), { allowPrivate: false })).ok).toBe(true)
    const missing = await resolveWebhookUrl(new URL("https://no-such-host.invalid/"), { allowPrivate: true })
    expect(missing.ok).toBe(false)
    if (!missing.ok) expect(missing.reason).toMatch(/^The webhook URL's host no-such-host\.invalid does not resolve \(/)
  }, 20_000)
})

describe("guardedLookup", () => {
  const call = (allowPrivate: boolean, options: object | number) =>
    new Promise<{ error: NodeJS.ErrnoException | null; address: unknown; family?: number }>((resolve) =>
      (guardedLookup(allowPrivate) as (h: string, o: unknown, cb: (...args: Array<any>) => void) => void)(
        "localhost", options, (error, address, family) => resolve({ error, address, family })))

  it("fails with EPV_REFUSED_ADDRESS for a loopback name, in the single-address and the all-addresses call", async () => {
    for (const options of [{}, { all: true }, { family: 4 }, 4, { family: 0, hints: 0, all: false }]) {
      const { error } = await call(false, options)
      expect(error?.code, JSON.stringify(options)).toBe(RefusedAddressCode)
      expect(error?.message).toMatch(/^refused address (127\.0\.0\.1|::1) \(localhost\)$/)
    }
  })

  it("answers like dns.lookup when allowed: one address and its family, or the list", async () => {
    const one = await call(true, { family: 4 })
    expect(one).toEqual({ error: null, address: "127.0.0.1", family: 4 })
    const all = await call(true, { all: true })
    expect(all.error).toBeNull()
    expect(all.address).toEqual(expect.arrayContaining([{ address: "127.0.0.1", family: 4 }]))
  })
})
