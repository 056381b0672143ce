import { bytesEqual } from "./Bytes.js"
import { accept, refuse, type Checked } from "./Checked.js"
import { checkCosignatures, CosignatureV1Type, Ed25519SignatureType, parseKey, type NoteKey } from "./Note.js"
import type { Verifying } from "./Run.js"

/**
 * C2SP tlog-policy (https://c2sp.org/tlog-policy): which logs and witnesses a verifier knows and the
 * quorum of witnesses a checkpoint needs. One parser and one serializer, shared by the service
 * (GET /log/policy, PV_LOG_WITNESS_POLICY), the CLI (`--policy FILE`), the client module and the page.
 * Lines: `log <vkey> [<url>]`, `witness <name> <vkey> [<url>]`, `group <name> all|any|<k> <name>...`,
 * `quorum <name>|none`; blank lines and `#` comments are ignored; items are separated by spaces and tabs.
 */

export interface PolicyLog {
  /** Note verifier key (type 0x01); its name is the log's origin. */
  readonly vkey: string
  readonly url?: string
}

export interface PolicyWitness {
  readonly name: string
  /** cosignature/v1 verifier key (type 0x04). */
  readonly vkey: string
  /** The witness's submission prefix (tlog-witness), when given. */
  readonly url?: string
}

export interface PolicyGroup {
  readonly name: string
  /** As written: `all` (k = n), `any` (k = 1), or k. */
  readonly threshold: "all" | "any" | number
  readonly members: ReadonlyArray<string>
}

export interface TlogPolicy {
  readonly logs: ReadonlyArray<PolicyLog>
  readonly witnesses: ReadonlyArray<PolicyWitness>
  /** In the order defined: a group names only witnesses and groups defined before it. */
  readonly groups: ReadonlyArray<PolicyGroup>
  /** A witness's or group's name, or `none` (no cosignature needed). */
  readonly quorum: string
}

/** The predefined name: a quorum that needs no cosignature. */
export const QuorumNone = "none"

/** Beyond the spec's recommended minimum (32 of each); bounds what a pasted policy can cost. */
export const MaxPolicyEntries = 256

/** Only tab, newline, 0x20-0x7E and octets above 0x7F are allowed. */
const Forbidden = /[\u0000-\u0008\u000b-\u001f\u007f]/u

const Whitespace = /[ \t]+/u

const Threshold = /^[1-9][0-9]{0,5}$/u

/**
 * Parses a policy, checking every key (its ID, type and usability). An error names the line
 * (`line 3: …`): an unknown keyword, a wrong number of items, a bad key, a name defined twice or not
 * before its use, a duplicate log or witness key (the same public key, whatever its name), a member
 * listed twice in a group, a threshold outside 1..n, a second quorum line. No quorum line is an error too.
 */
export function* parsePolicy(text: string): Verifying<Checked<TlogPolicy>> {
  if (typeof text !== "string") return refuse("the policy is not text")
  const logs: Array<PolicyLog> = []
  const witnesses: Array<PolicyWitness> = []
  const groups: Array<PolicyGroup> = []
  const logKeys: Array<Uint8Array> = []
  const witnessKeys: Array<Uint8Array> = []
  /** Witness and group names share one namespace. */
  const names = new Set<string>()
  let quorum: string | undefined
  const lines = text.split("\n")
  if (lines.at(-1) === "") lines.pop()
  for (const [index, raw] of lines.entries()) {
    const at = (detail: string) => refuse<TlogPolicy>(`line ${index + 1}: ${detail}`)
    if (Forbidden.test(raw)) return at("holds a control character (only tab and newline are allowed)")
    const line = raw.replace(/^[ \t]+|[ \t]+$/gu, "")
    if (line === "" || line.startsWith("#")) continue
    const [keyword, ...items] = line.split(Whitespace) as [string, ...Array<string>]
    const newName = (name: string): string | undefined =>
      name === QuorumNone ? `"${QuorumNone}" is predefined` : names.has(name) ? `the name ${name} is already defined` : undefined
    switch (keyword) {
      case "log": {
        if (items.length < 1 || items.length > 2) return at("is not `log <vkey> [<url>]`")
        const key = yield* parseKey(items[0], Ed25519SignatureType)
        if (!key.ok) return at(`the log key: ${key.detail}`)
        if (logKeys.some((k) => bytesEqual(k, key.value.publicKey))) return at("this log's public key is already listed")
        if (logs.length >= MaxPolicyEntries) return at(`more than ${MaxPolicyEntries} logs`)
        logKeys.push(key.value.publicKey)
        logs.push({ vkey: items[0]!, ...(items[1] === undefined ? {} : { url: items[1] }) })
        break
      }
      case "witness": {
        if (items.length < 2 || items.length > 3) return at("is not `witness <name> <vkey> [<url>]`")
        const [name, vkey, url] = items as [string, string, string | undefined]
        const taken = newName(name)
        if (taken !== undefined) return at(taken)
        const key = yield* parseKey(vkey, CosignatureV1Type)
        if (!key.ok) return at(`the key of witness ${name}: ${key.detail}`)
        if (witnessKeys.some((k) => bytesEqual(k, key.value.publicKey))) return at(`witness ${name}'s public key is already listed`)
        if (witnesses.length >= MaxPolicyEntries) return at(`more than ${MaxPolicyEntries} witnesses`)
        witnessKeys.push(key.value.publicKey)
        names.add(name)
        witnesses.push({ name, vkey, ...(url === undefined ? {} : { url }) })
        break
      }
      case "group": {
        if (items.length < 3) return at("is not `group <name> all|any|<k> <name>...`")
        const [name, written, ...members] = items as [string, string, ...Array<string>]
        const taken = newName(name)
        if (taken !== undefined) return at(taken)
        for (const [i, member] of members.entries()) {
          if (member === QuorumNone) return at(`"${QuorumNone}" cannot be a group member`)
          if (!names.has(member)) return at(`${member} is not a witness or group defined on an earlier line`)
          if (members.indexOf(member) !== i) return at(`${member} is listed twice in group ${name}`)
        }
        const threshold = written === "all" || written === "any" ? written : Threshold.test(written) ? Number(written) : undefined
        if (threshold === undefined) return at(`the threshold ${written} is not all, any or a decimal number`)
        if (typeof threshold === "number" && threshold > members.length) return at(`the threshold ${threshold} is more than the group's ${members.length} member(s)`)
        if (groups.length >= MaxPolicyEntries) return at(`more than ${MaxPolicyEntries} groups`)
        names.add(name)
        groups.push({ name, threshold, members })
        break
      }
      case "quorum": {
        if (items.length !== 1) return at("is not `quorum <name>`")
        if (quorum !== undefined) return at("a policy has exactly one quorum line; this is the second")
        if (items[0] !== QuorumNone && !names.has(items[0]!)) return at(`${items[0]} is not a witness or group defined on an earlier line`)
        quorum = items[0]!
        break
      }
      default:
        return at(`unknown keyword ${JSON.stringify(keyword)} (log, witness, group or quorum)`)
    }
  }
  if (quorum === undefined) return refuse(`line ${lines.length + 1}: the policy has no quorum line (\`quorum none\` asks for no cosignature)`)
  return accept({ logs, witnesses, groups, quorum })
}

const withUrl = (line: string, url: string | undefined) => (url === undefined ? line : `${line} ${url}`)

/** The policy as text: the log lines, the witness lines, the groups in order, the quorum line. */
export const serializePolicy = (policy: TlogPolicy): string =>
  [
    ...policy.logs.map((log) => withUrl(`log ${log.vkey}`, log.url)),
    ...policy.witnesses.map((witness) => withUrl(`witness ${witness.name} ${witness.vkey}`, witness.url)),
    ...policy.groups.map((group) => `group ${group.name} ${group.threshold} ${group.members.join(" ")}`),
    `quorum ${policy.quorum}`
  ].map((line) => `${line}\n`).join("")

/** How many of a group's members must have witnessed. */
export const thresholdOf = (group: PolicyGroup): number =>
  group.threshold === "all" ? group.members.length : group.threshold === "any" ? 1 : group.threshold

/**
 * Whether the witnesses named in `cosigned` satisfy the policy's quorum: a witness witnessed when it is
 * in the set, a group when at least k of its members did, `none` always.
 */
export const quorumMet = (policy: TlogPolicy, cosigned: ReadonlySet<string>): boolean => {
  const memo = new Map<string, boolean>()
  const byName = new Map(policy.groups.map((group) => [group.name, group]))
  const met = (name: string): boolean => {
    if (name === QuorumNone) return true
    const known = memo.get(name)
    if (known !== undefined) return known
    const group = byName.get(name)
    const result = group === undefined
      ? cosigned.has(name)
      : group.members.filter(met).length >= thresholdOf(group)
    memo.set(name, result)
    return result
  }
  return met(policy.quorum)
}

/**
 * The policy's key for the log of `origin` (its key name is the origin); when none has that name, the
 * first log's (the checkpoint then fails naming both); none when the policy lists no log.
 */
export function* policyLogKey(policy: TlogPolicy, origin: string | undefined): Verifying<NoteKey | undefined> {
  let first: NoteKey | undefined
  for (const log of policy.logs) {
    const key = yield* parseKey(log.vkey, Ed25519SignatureType)
    if (!key.ok) continue
    if (key.value.name === origin) return key.value
    first ??= key.value
  }
  return first
}

/**
 * Whether a checkpoint note meets the policy's quorum: every cosignature line by a listed witness must
 * verify (and be no more than 60 s ahead of `nowSeconds`), and the witnesses whose cosignature does
 * must satisfy the quorum. The detail names those witnesses.
 */
export function* policyQuorum(note: unknown, policy: TlogPolicy, nowSeconds: number): Verifying<Checked<string>> {
  const keyed: Array<NoteKey & { readonly policyName: string }> = []
  for (const witness of policy.witnesses) {
    const key = yield* parseKey(witness.vkey, CosignatureV1Type)
    if (!key.ok) return refuse(`the key of witness ${witness.name}: ${key.detail}`)
    keyed.push({ ...key.value, policyName: witness.name })
  }
  const checked = yield* checkCosignatures(note, keyed, nowSeconds)
  if (!checked.ok) return checked
  if (checked.value.refused.length > 0) return refuse(checked.value.refused.join("; "))
  const cosigned = new Set(checked.value.valid.map((w) => w.witness.policyName))
  const names = cosigned.size === 0 ? "none" : [...cosigned].join(", ")
  const summary = `${cosigned.size} of the policy's ${keyed.length} witnesses cosigned the checkpoint (${names}); the quorum is ${policy.quorum}`
  return quorumMet(policy, cosigned) ? accept(summary) : refuse(`the policy's quorum is not met: ${summary}`)
}

/** A witness as a k-of-n setting holds it (PV_LOG_WITNESSES): its key, and where it takes submissions. */
export interface CountedWitness {
  readonly vkey: string
  readonly url?: string
}

/** `base`, or `base` with the first free suffix `-2`, `-3`, … when it is taken (or is `none`). */
const freeName = (base: string, taken: ReadonlySet<string>): string => {
  if (base !== QuorumNone && !taken.has(base)) return base
  for (let i = 2; ; i++) if (!taken.has(`${base}-${i}`)) return `${base}-${i}`
}

/**
 * The policy of "k of these n witnesses" for a log: each witness named by its key name (made unique when
 * two share one), and the quorum `none` without witnesses, the witness itself for one, else a group
 * `quorum` of all of them with threshold `all` (k = n), `any` (k = 1) or k.
 */
export const countedPolicy = (logVkey: string | undefined, witnesses: ReadonlyArray<CountedWitness>, quorum: number): TlogPolicy => {
  const taken = new Set<string>()
  const named = witnesses.map((witness) => {
    const name = freeName(witness.vkey.slice(0, Math.max(0, witness.vkey.indexOf("+"))) || "witness", taken)
    taken.add(name)
    return { name, vkey: witness.vkey, ...(witness.url === undefined ? {} : { url: witness.url }) }
  })
  const logs = logVkey === undefined ? [] : [{ vkey: logVkey }]
  if (named.length === 0) return { logs, witnesses: [], groups: [], quorum: QuorumNone }
  if (named.length === 1) return { logs, witnesses: named, groups: [], quorum: named[0]!.name }
  const group = freeName("quorum", taken)
  const threshold = quorum >= named.length ? "all" : quorum === 1 ? "any" : quorum
  return { logs, witnesses: named, groups: [{ name: group, threshold, members: named.map((w) => w.name) }], quorum: group }
}

/**
 * The reverse, for a service that counts cosignatures: a policy whose quorum is `none` with no witness,
 * its only witness, or one group of all its witnesses (no subgroups), as k of n. Anything else is refused,
 * saying why.
 */
export const countedQuorumOf = (policy: TlogPolicy): Checked<{ readonly witnesses: ReadonlyArray<PolicyWitness>; readonly quorum: number }> => {
  const { witnesses, quorum } = policy
  if (quorum === QuorumNone) {
    return witnesses.length === 0 ? accept({ witnesses, quorum: 0 }) : refuse("`quorum none` with witnesses listed: list none, or name the quorum")
  }
  if (witnesses.some((w) => w.name === quorum)) {
    return witnesses.length === 1 ? accept({ witnesses, quorum: 1 }) : refuse(`the quorum is one witness (${quorum}) of ${witnesses.length}: make it a group of all of them`)
  }
  const group = policy.groups.find((g) => g.name === quorum)!
  const members = new Set(group.members)
  if (members.size !== witnesses.length || !witnesses.every((w) => members.has(w.name))) {
    return refuse(`the quorum group ${quorum} must have every listed witness as a direct member (and nothing else): the service counts cosignatures`)
  }
  return accept({ witnesses, quorum: thresholdOf(group) })
}
