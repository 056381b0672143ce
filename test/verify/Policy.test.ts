import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { parsePolicy as parseClientPolicy, witnessQuorumProblem } from "../../src/client/log.js"
import { privateKeyFromSeed } from "../../src/events/Signer.js"
import { signCheckpoint } from "../../src/log/Checkpoint.js"
import { appendSignatureLines, cosignerFromPrivateKey, parseCosignerKey, requireQuorum } from "../../src/log/Cosignature.js"
import { noteSignerFromPrivateKey, splitNote, verifierKeyOfSigner } from "../../src/log/Note.js"
import { verifySync } from "../../src/verify/NodeCrypto.js"
import {
  countedPolicy,
  countedQuorumOf,
  parsePolicy,
  policyQuorum,
  quorumMet,
  serializePolicy,
  type PolicyGroup,
  type PolicyWitness,
  type TlogPolicy
} from "../../src/verify/Policy.js"

/** C2SP tlog-policy (src/verify/Policy.ts): the format both ways, its errors by line, and its quorum rule. */

const parse = (text: string) => verifySync(parsePolicy(text))

const logKeys = [1, 2, 3].map((i) => verifierKeyOfSigner(`log${i}.example/log`, privateKeyFromSeed(Buffer.alloc(32, 100 + i))))
const cosigners = Array.from({ length: 10 }, (_, i) => cosignerFromPrivateKey(`witness${i}.example/w`, privateKeyFromSeed(Buffer.alloc(32, 10 + i))))
const witnessKeys = cosigners.map((c) => c.verifierKey)

const origin = "example.com/log"
const logSigner = noteSignerFromPrivateKey(origin, privateKeyFromSeed(Buffer.alloc(32, 9)))
const logNote = signCheckpoint({ origin, size: 5, root: Buffer.alloc(32, 7), extensions: [] }, logSigner)
const now = 1_800_000_000
/** The log's checkpoint cosigned by the witnesses at these indexes. */
const cosignedBy = (indexes: Iterable<number>) => {
  const split = splitNote(logNote)
  if (!split.ok) throw new Error(split.detail)
  return appendSignatureLines(logNote, [...indexes].map((i) => cosigners[i]!.cosign(split.value.text, now - 10)))
}

const url = fc.option(fc.constantFrom("https://witness.example/a", "http://127.0.0.1:9/w", "https://log.example/"), { nil: undefined })
const name = fc.stringMatching(/^[A-Za-z0-9._\-/é]{1,12}$/).filter((n) => n !== "none")

/** Valid policies: distinct keys, distinct names, groups over names defined before them, k within 1..n. */
const policies: fc.Arbitrary<TlogPolicy> = fc
  .record({
    logs: fc.subarray(logKeys).chain((keys) => fc.tuple(...keys.map((vkey) => fc.record({ vkey: fc.constant(vkey), url })))),
    witnessKeys: fc.subarray(witnessKeys),
    names: fc.uniqueArray(name, { minLength: 30, maxLength: 30 }),
    groupPlans: fc.array(fc.tuple(fc.array(fc.nat(), { minLength: 1, maxLength: 5 }), fc.oneof(fc.constantFrom("all" as const, "any" as const), fc.nat(9))), { maxLength: 4 }),
    witnessUrls: fc.array(url, { minLength: 10, maxLength: 10 }),
    quorumPick: fc.nat()
  })
  .map(({ logs, witnessKeys: keys, names, groupPlans, witnessUrls, quorumPick }) => {
    const strip = <T extends { url?: string | undefined }>(o: T) => (o.url === undefined ? (({ url: _, ...rest }) => rest)(o) : o)
    const witnesses: Array<PolicyWitness> = keys.map((vkey, i) => strip({ name: names[i]!, vkey, url: witnessUrls[i] }))
    const defined = witnesses.map((w) => w.name)
    const groups: Array<PolicyGroup> = []
    for (const [g, [picks, threshold]] of groupPlans.entries()) {
      if (defined.length === 0) break
      const members = [...new Set(picks.map((p) => defined[p % defined.length]!))]
      const k = typeof threshold === "number" ? 1 + (threshold % members.length) : threshold
      const groupName = names[10 + g]!
      groups.push({ name: groupName, threshold: k, members })
      defined.push(groupName)
    }
    const quorum = defined.length === 0 || quorumPick % (defined.length + 1) === defined.length ? "none" : defined[quorumPick % (defined.length + 1)]!
    return { logs: logs.map(strip), witnesses, groups, quorum }
  })

describe("C2SP tlog-policy", () => {
  it("property: parse(serialize(p)) = p for every valid policy", () => {
    fc.assert(fc.property(policies, (policy) => {
      expect(parse(serializePolicy(policy))).toEqual({ ok: true, value: policy })
    }), { numRuns: 200 })
  })

  it("property: blank lines, comments and runs of spaces and tabs around the items change nothing", () => {
    const spacing = fc.constantFrom(" ", "\t", "  \t ", "\t\t")
    fc.assert(fc.property(policies, fc.array(fc.tuple(spacing, spacing, fc.boolean()), { minLength: 50, maxLength: 50 }), (policy, noise) => {
      const lines = serializePolicy(policy).slice(0, -1).split("\n")
      const noisy = lines.flatMap((line, i) => {
        const [a, b, comment] = noise[i % noise.length]!
        return [`${a}${line.split(" ").join(b)}${b}`, ...(comment ? ["", `${a}# a comment: witness x y z`] : [])]
      })
      expect(parse(noisy.join("\n"))).toEqual({ ok: true, value: policy })
    }), { numRuns: 100 })
  })

  it("refuses a malformed policy, naming the line", () => {
    const [w1, w2] = witnessKeys as [string, string]
    const [log1] = logKeys as [string]
    const cases: Array<[string, RegExp]> = [
      [`log ${log1}\nwitnes A ${w1}\nquorum A\n`, /^line 2: unknown keyword "witnes"/],
      [`witness A ${w1}\nwitness A ${w2}\nquorum A\n`, /^line 2: the name A is already defined/],
      [`witness A ${w1}\ngroup A any A\nquorum A\n`, /^line 2: the name A is already defined/],
      [`witness A ${w1}\nwitness B ${w1}\nquorum A\n`, /^line 2: witness B's public key is already listed/],
      [`log ${log1}\nlog ${log1} https://x.example\nquorum none\n`, /^line 2: this log's public key is already listed/],
      [`# c\n\nwitness A ${w1}\ngroup G 2 A\nquorum G\n`, /^line 4: the threshold 2 is more than the group's 1 member/],
      [`witness A ${w1}\ngroup G 0 A\nquorum G\n`, /^line 2: the threshold 0 is not all, any or a decimal number/],
      [`witness A ${w1}\ngroup G any A A\nquorum G\n`, /^line 2: A is listed twice in group G/],
      [`group G any A\nwitness A ${w1}\nquorum G\n`, /^line 1: A is not a witness or group defined on an earlier line/],
      [`witness A ${w1}\nquorum B\n`, /^line 2: B is not a witness or group defined/],
      [`witness A ${w1}\nquorum A\nquorum none\n`, /^line 3: a policy has exactly one quorum line/],
      [`witness A ${w1}\n`, /^line 2: the policy has no quorum line/],
      [`witness none ${w1}\nquorum none\n`, /^line 1: "none" is predefined/],
      [`witness A ${w1}\ngroup G any none\nquorum G\n`, /^line 2: "none" cannot be a group member/],
      [`witness A ${log1}\nquorum A\n`, /^line 1: the key of witness A: signature type 1 is not an Ed25519 cosignature\/v1 key/],
      [`log ${w1}\nquorum none\n`, /^line 1: the log key: signature type 4/],
      [`witness A ${w1.replace(/\+[0-9a-f]{8}\+/, "+00000000+")}\nquorum A\n`, /^line 1: the key of witness A: key ID 00000000 is not the ID/],
      [`witness A\nquorum none\n`, /^line 1: is not `witness <name> <vkey> \[<url>\]`/],
      [`witness A ${w1} https://a.example extra\nquorum A\n`, /^line 1: is not `witness/],
      [`quorum\n`, /^line 1: is not `quorum <name>`/],
      [`witness A ${w1}\r\nquorum A\n`, /^line 1: holds a control character/],
      [`witness A ${w1}\nquorum A\u0000\n`, /^line 2: holds a control character/]
    ]
    for (const [text, expected] of cases) {
      const parsed = parse(text)
      expect(parsed.ok, text).toBe(false)
      if (!parsed.ok) expect(parsed.detail, text).toMatch(expected)
    }
    // The client module's parser is the same one.
    expect(parseClientPolicy(cases[0]![0])).toEqual(parse(cases[0]![0]))
  })

  it("property: a group is met when at least k of its members are; nested groups compose", () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 6 }), fc.nat(), fc.subarray([0, 1, 2, 3, 4, 5]), (n, pick, cosigning) => {
      const k = 1 + (pick % n)
      const names = Array.from({ length: n }, (_, i) => `w${i}`)
      const policy: TlogPolicy = {
        logs: [],
        witnesses: names.map((name, i) => ({ name, vkey: witnessKeys[i]! })),
        groups: [{ name: "g", threshold: k, members: names }, { name: "top", threshold: "all", members: ["g"] }],
        quorum: "top"
      }
      const cosigned = new Set(cosigning.filter((i) => i < n).map((i) => `w${i}`))
      expect(quorumMet(policy, cosigned)).toBe(cosigned.size >= k)
    }))
    const none: TlogPolicy = { logs: [], witnesses: [], groups: [], quorum: "none" }
    expect(quorumMet(none, new Set())).toBe(true)
  })

  it("checks real cosignatures against the spec's two-level example (2 of the X witnesses and any Y witness)", () => {
    const [x1, x2, x3, y1, y2] = witnessKeys as [string, string, string, string, string]
    const text = `log ${logKeys[0]}\nwitness X1 ${x1}\nwitness X2 ${x2}\nwitness X3 ${x3}\ngroup X-witnesses 2 X1 X2 X3\n` +
      `witness Y1 ${y1}\nwitness Y2 ${y2}\ngroup Y-witnesses any Y1 Y2\ngroup X-and-Y all X-witnesses Y-witnesses\nquorum X-and-Y\n`
    const parsed = parse(text)
    if (!parsed.ok) throw new Error(parsed.detail)
    const check = (indexes: Array<number>) => verifySync(policyQuorum(cosignedBy(indexes), parsed.value, now))
    expect(check([0, 1, 3]).ok).toBe(true)
    expect(check([0, 2, 4]).ok).toBe(true)
    expect(check([0, 3, 4])).toMatchObject({ ok: false, detail: expect.stringMatching(/quorum is not met: 3 of the policy's 5 witnesses cosigned/) })
    expect(check([0, 1, 2]).ok).toBe(false)
    // The client module takes the policy's text (or the parsed policy) beside or instead of --witness/--quorum.
    expect(witnessQuorumProblem(cosignedBy([0, 1, 3]), { policy: text, nowSeconds: now }).ok).toBe(true)
    expect(witnessQuorumProblem(cosignedBy([0, 1]), { policy: parsed.value, nowSeconds: now }).ok).toBe(false)
    expect(witnessQuorumProblem(cosignedBy([0, 1]), { policy: "quorum X\n", nowSeconds: now })).toMatchObject({ ok: false, detail: /^the policy: line 1: X is not/ })
  })

  it("property: a witness key given twice counts once toward a quorum (client module and service verifiers alike)", () => {
    fc.assert(fc.property(
      fc.integer({ min: 1, max: 5 }),
      fc.subarray([0, 1, 2, 3, 4]),
      fc.array(fc.nat(4), { minLength: 1, maxLength: 8 }),
      fc.integer({ min: 1, max: 8 }),
      (n, cosigning, extra, quorum) => {
        const distinct = witnessKeys.slice(0, n)
        const signed = cosigning.filter((i) => i < n)
        // Every distinct key at least once, then repeats: the list is longer than the distinct set.
        const listed = [...distinct, ...extra.map((i) => distinct[i % n]!)]
        const note = cosignedBy(signed)
        const expected = quorum <= n && signed.length >= quorum
        expect(witnessQuorumProblem(note, { witnesses: listed, quorum, nowSeconds: now }).ok).toBe(expected)
        const verifiers = listed.map((vkey) => {
          const parsed = parseCosignerKey(vkey)
          if (!parsed.ok) throw new Error(parsed.detail)
          return parsed.value
        })
        expect(requireQuorum(note, verifiers, quorum, now).ok).toBe(signed.length >= quorum)
      }
    ), { numRuns: 100 })
    // The default quorum (all) is of the distinct witnesses: one witness given twice, cosigned once, meets it.
    expect(witnessQuorumProblem(cosignedBy([0]), { witnesses: [witnessKeys[0]!, witnessKeys[0]!], nowSeconds: now })).toMatchObject({ ok: true })
  })

  it("property: a k-of-n setting becomes a policy and back (the service's /log/policy and PV_LOG_WITNESS_POLICY)", () => {
    fc.assert(fc.property(fc.subarray(witnessKeys), fc.nat(), fc.boolean(), (keys, pick, withLog) => {
      const quorum = keys.length === 0 ? 0 : 1 + (pick % keys.length)
      const counted = keys.map((vkey, i) => ({ vkey, url: `http://127.0.0.1:${9000 + i}` }))
      const policy = countedPolicy(withLog ? logKeys[0] : undefined, counted, quorum)
      expect(parse(serializePolicy(policy))).toEqual({ ok: true, value: policy })
      const back = countedQuorumOf(policy)
      expect(back.ok && back.value.quorum).toBe(quorum)
      expect(back.ok && back.value.witnesses.map((w) => [w.vkey, w.url])).toEqual(counted.map((w) => [w.vkey, w.url]))
    }))
    // Two witnesses whose keys share a name get distinct policy names.
    const twins = [cosignerFromPrivateKey("w.example", privateKeyFromSeed(Buffer.alloc(32, 60))), cosignerFromPrivateKey("w.example", privateKeyFromSeed(Buffer.alloc(32, 61)))]
    const policy = countedPolicy(undefined, twins.map((t) => ({ vkey: t.verifierKey })), 2)
    expect(serializePolicy(policy)).toBe(
      `witness w.example ${twins[0]!.verifierKey}\nwitness w.example-2 ${twins[1]!.verifierKey}\ngroup quorum all w.example w.example-2\nquorum quorum\n`
    )
    expect(serializePolicy(countedPolicy(logKeys[0], [], 0))).toBe(`log ${logKeys[0]}\nquorum none\n`)
    // What a counting service cannot hold is refused, saying why.
    const [a, b] = witnessKeys as [string, string]
    const only = parse(`witness A ${a}\nwitness B ${b}\nquorum A\n`)
    expect(only.ok && countedQuorumOf(only.value)).toMatchObject({ ok: false, detail: /one witness \(A\) of 2/ })
    const nested = parse(`witness A ${a}\nwitness B ${b}\ngroup G any A\ngroup H all G B\nquorum H\n`)
    expect(nested.ok && countedQuorumOf(nested.value)).toMatchObject({ ok: false, detail: /every listed witness as a direct member/ })
  })
})
