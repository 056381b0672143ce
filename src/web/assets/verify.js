// @ts-check
/**
 * Every check the page runs, in one plain ES module with no dependencies: RFC 8785 (JCS), the event
 * chain recipe (docs/API.md §10.4) and the receipt proof bundle (docs/API.md §11.7, §11.8: RFC 9162 Merkle inclusion,
 * C2SP signed-note checkpoints, Ed25519). Crypto is WebCrypto only (`crypto.subtle`), so the same file
 * runs in a browser and in Node 20, where test/web/verify.test.ts checks it against the service's own
 * verifiers (src/domain/EventVerify.ts, src/client/log.ts). Verdicts and details follow those verifiers.
 * Nothing here throws on what it is given: a malformed member is a failed check with a detail.
 */

/** @typedef {Record<string, unknown>} JsonRecord */
/** @typedef {{ readonly sequence: number, readonly eventHash: string | null }} ChainHead */
/**
 * @typedef {"malformed-event" | "wrong-determination" | "sequence-mismatch" | "broken-link" | "hash-mismatch"
 *   | "unknown-kid" | "bad-signature" | "head-mismatch"} ChainFailureReason
 */
/**
 * One event as the page shows it: its own checks, each independent of the others, so every row says
 * what is wrong with that event even after the first failure.
 * @typedef {{
 *   readonly index: number,
 *   readonly sequence: unknown,
 *   readonly type: unknown,
 *   readonly malformed: string | null,
 *   readonly hash_ok: boolean,
 *   readonly link_ok: boolean,
 *   readonly signature_ok: boolean,
 *   readonly kid: string | null
 * }} EventCheck
 */
/**
 * @typedef {(
 *   { readonly ok: true, readonly count: number, readonly head: ChainHead, readonly kids: ReadonlyArray<string> }
 *   | { readonly ok: false, readonly sequence: number, readonly reason: ChainFailureReason, readonly detail: string, readonly verified: number }
 * ) & { readonly events: ReadonlyArray<EventCheck> }} ChainReport
 */
/**
 * @typedef {{ readonly publicId?: string, readonly anchor?: ChainHead, readonly head?: ChainHead }} ChainOptions
 */
/** @typedef {"digest" | "entry" | "leaf" | "inclusion" | "checkpoint_signature" | "witness_cosignatures" | "receipt_signature"} BundleStep */
/** @typedef {{ readonly step: BundleStep, readonly ok: boolean, readonly checked: boolean, readonly detail: string }} BundleStepResult */
/**
 * @typedef {{
 *   readonly ok: boolean,
 *   readonly steps: ReadonlyArray<BundleStepResult>,
 *   readonly failed_step?: BundleStep,
 *   readonly not_checked: ReadonlyArray<BundleStep>,
 *   readonly keys: { readonly verifier_key: "pinned" | "bundle", readonly receipt_key: "pinned" | "bundle" | "none" }
 * }} BundleVerdict
 */
/** @typedef {{ readonly keys: ReadonlyArray<unknown> } | Uint8Array} ReceiptKeys */
/**
 * Witness cosignature/v1 verifier keys to pin and how many of them must have cosigned (default: all);
 * `nowSeconds` is the verifier's clock (default: now).
 * @typedef {{ readonly witnesses?: ReadonlyArray<string>, readonly quorum?: number, readonly nowSeconds?: number }} WitnessPolicy
 */
/** @typedef {{ readonly receiptKeys?: ReceiptKeys, readonly verifierKey?: string } & WitnessPolicy} BundleOptions */
/**
 * @template A
 * @typedef {{ readonly ok: true, readonly value: A } | { readonly ok: false, readonly detail: string }} Checked
 */
/** @typedef {{ readonly name: string, readonly keyId: Uint8Array, readonly publicKey: Uint8Array }} NoteVerifier */
/** @typedef {{ readonly origin: string, readonly size: number, readonly root: Uint8Array, readonly extensions: ReadonlyArray<string> }} Checkpoint */

/** Every step, in order; `witness_cosignatures` only runs with pinned witnesses. */
export const BundleSteps = /** @type {const} */ (["digest", "entry", "leaf", "inclusion", "checkpoint_signature", "witness_cosignatures", "receipt_signature"])

/** @returns {SubtleCrypto} */
const subtle = () => {
  const found = globalThis.crypto?.subtle
  if (found === undefined) throw new Error("WebCrypto is not available: open this page over HTTPS or from localhost")
  return found
}

/** True when this context can verify at all (browsers offer WebCrypto only in secure contexts). */
export const cryptoAvailable = () => globalThis.crypto?.subtle !== undefined

/**
 * @template A
 * @param {A} value
 * @returns {Checked<A>}
 */
const accept = (value) => ({ ok: true, value })
/** @param {string} detail @returns {{ readonly ok: false, readonly detail: string }} */
const refuse = (detail) => ({ ok: false, detail })

/** @param {unknown} u @returns {u is JsonRecord} */
const isRecord = (u) => typeof u === "object" && u !== null && !Array.isArray(u)

/** @param {unknown} n @returns {n is number} */
const isSafeInteger = (n) => Number.isSafeInteger(n)

/** @param {unknown} u */
const shown = (u) => {
  try {
    return JSON.stringify(u) ?? String(u)
  } catch {
    return String(u)
  }
}

// ---------------------------------------------------------------------------------------------------
// Bytes: UTF-8, hex, base64 (standard and url-safe), all strict.

const encoder = new TextEncoder()

/** @param {string} text */
export const utf8 = (text) => encoder.encode(text)

/** @param {...Uint8Array} parts */
const concat = (...parts) => {
  const out = new Uint8Array(parts.reduce((n, part) => n + part.length, 0))
  let at = 0
  for (const part of parts) {
    out.set(part, at)
    at += part.length
  }
  return out
}

/** @param {Uint8Array} bytes */
export const hexOf = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")

const HexHashPattern = /^[0-9a-f]{64}$/

/** Exactly 64 lowercase hex characters → 32 bytes. @param {unknown} hex @returns {Uint8Array | undefined} */
export const hashFromHex = (hex) => {
  if (typeof hex !== "string" || !HexHashPattern.test(hex)) return undefined
  const out = new Uint8Array(32)
  for (let i = 0; i < 32; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16)
  return out
}

/** @param {unknown} value @returns {Array<Uint8Array> | undefined} */
const hashesFromHex = (value) => {
  if (!Array.isArray(value)) return undefined
  /** @type {Array<Uint8Array>} */
  const hashes = []
  for (const item of value) {
    const hash = hashFromHex(item)
    if (hash === undefined) return undefined
    hashes.push(hash)
  }
  return hashes
}

/** @param {Uint8Array} bytes */
export const base64Of = (bytes) => {
  let binary = ""
  for (const b of bytes) binary += String.fromCharCode(b)
  return btoa(binary)
}

/** @param {Uint8Array} bytes */
export const base64UrlOf = (bytes) => base64Of(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")

/** @param {string} text */
const bytesOfBinary = (text) => Uint8Array.from(text, (c) => c.charCodeAt(0))

const StdBase64Pattern = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

/** Standard padded base64, canonical only (unused bits zero). @param {string} text @returns {Uint8Array | undefined} */
export const decodeStdBase64 = (text) => {
  if (!StdBase64Pattern.test(text)) return undefined
  const bytes = bytesOfBinary(atob(text))
  return base64Of(bytes) === text ? bytes : undefined
}

/** Unpadded base64url, canonical only. @param {string} text @returns {Uint8Array | undefined} */
export const decodeBase64Url = (text) => {
  if (!/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) return undefined
  const std = text.replace(/-/g, "+").replace(/_/g, "/")
  const bytes = bytesOfBinary(atob(std + "=".repeat((4 - (std.length % 4)) % 4)))
  return base64UrlOf(bytes) === text ? bytes : undefined
}

/** @param {Uint8Array} a @param {Uint8Array} b */
const bytesEqual = (a, b) => a.length === b.length && a.every((byte, i) => byte === b[i])

// ---------------------------------------------------------------------------------------------------
// RFC 8785 (JCS) for JSON values, as the service's `canonicalize` package does it.

/** @param {string} value */
const hasLoneSurrogate = (value) => /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(value)

/**
 * RFC 8785: members sorted by their names' UTF-16 code units (what `Array.prototype.sort` compares),
 * strings and numbers as ECMAScript's JSON.stringify writes them, no white space. Refuses NaN,
 * Infinity, lone surrogates and cycles, which have no canonical form.
 * @param {unknown} value
 * @returns {string}
 */
export const canonicalJson = (value) => {
  /** @type {Set<object>} */
  const seen = new Set()
  /** @param {unknown} v @returns {string} */
  const walk = (v) => {
    if (typeof v === "number" && !Number.isFinite(v)) throw new TypeError("NaN and Infinity have no canonical JSON form")
    if (typeof v === "string" && hasLoneSurrogate(v)) throw new TypeError("a lone surrogate has no canonical JSON form")
    if (v === null || typeof v !== "object") {
      const text = JSON.stringify(v)
      if (text === undefined) throw new TypeError(`${typeof v} has no JSON form`)
      return text
    }
    if (seen.has(v)) throw new TypeError("a circular value has no JSON form")
    seen.add(v)
    let text
    if (Array.isArray(v)) {
      text = `[${v.map((item) => walk(item === undefined || typeof item === "symbol" ? null : item)).join(",")}]`
    } else {
      const record = /** @type {JsonRecord} */ (v)
      const members = []
      for (const key of Object.keys(record).sort()) {
        const member = record[key]
        if (member === undefined || typeof member === "symbol" || typeof member === "function") continue
        members.push(`${walk(key)}:${walk(member)}`)
      }
      text = `{${members.join(",")}}`
    }
    seen.delete(v)
    return text
  }
  return walk(value)
}

/** @param {string | Uint8Array} input @returns {Promise<Uint8Array>} */
export const sha256 = async (input) =>
  new Uint8Array(await subtle().digest("SHA-256", typeof input === "string" ? utf8(input) : /** @type {BufferSource} */ (input)))

/** @param {string | Uint8Array} input */
export const sha256Hex = async (input) => hexOf(await sha256(input))

/** The documented digest (docs/API.md §2): SHA-256 hex of the JCS form. @param {unknown} value */
export const digestOf = (value) => sha256Hex(canonicalJson(value))

// ---------------------------------------------------------------------------------------------------
// Ed25519 (WebCrypto).

/** @type {Map<string, Promise<CryptoKey | null>>} */
const importedKeys = new Map()

/** A raw 32-byte Ed25519 public key, imported once; null when WebCrypto refuses it. @param {Uint8Array} raw */
const ed25519Key = (raw) => {
  const id = hexOf(raw)
  let key = importedKeys.get(id)
  if (key === undefined) {
    key = subtle().importKey("raw", /** @type {BufferSource} */ (raw), { name: "Ed25519" }, false, ["verify"]).catch(() => null)
    importedKeys.set(id, key)
  }
  return key
}

/** @param {CryptoKey} key @param {Uint8Array} signature @param {Uint8Array} data */
const ed25519Verify = async (key, signature, data) => {
  try {
    return await subtle().verify({ name: "Ed25519" }, key, /** @type {BufferSource} */ (signature), /** @type {BufferSource} */ (data))
  } catch {
    return false
  }
}

/** `kid` = first 16 hex of SHA-256 of the raw public key. @param {Uint8Array} raw */
export const kidOf = async (raw) => (await sha256Hex(raw)).slice(0, 16)

/**
 * Keys by kid from a JWKS. A key whose stated kid is not the kid of its own `x` is left out, so it can
 * never vouch for anything.
 * @param {unknown} jwks
 * @returns {Promise<Map<string, CryptoKey>>}
 */
export const keysFromJwks = async (jwks) => {
  /** @type {Map<string, CryptoKey>} */
  const keys = new Map()
  const list = isRecord(jwks) && Array.isArray(jwks.keys) ? jwks.keys : []
  for (const jwk of list) {
    if (!isRecord(jwk) || jwk.kty !== "OKP" || jwk.crv !== "Ed25519" || typeof jwk.x !== "string" || typeof jwk.kid !== "string") continue
    const raw = decodeBase64Url(jwk.x)
    if (raw === undefined || raw.length !== 32 || (await kidOf(raw)) !== jwk.kid) continue
    const key = await ed25519Key(raw)
    if (key !== null) keys.set(jwk.kid, key)
  }
  return keys
}

const SignaturePattern = /^[A-Za-z0-9_-]{86}$/

/** An unpadded base64url Ed25519 signature (64 bytes), or undefined. @param {string} sig */
const signatureBytes = (sig) => (SignaturePattern.test(sig) ? decodeBase64Url(sig) : undefined)

// ---------------------------------------------------------------------------------------------------
// Event chain (docs/API.md §10.4; src/domain/EventChain.ts, src/domain/EventVerify.ts).

export const EventHashDomain = "pv-event-v1\n"

/** eventHash: SHA-256 hex of "pv-event-v1\n" + JCS(event without eventHash and signature). @param {JsonRecord} event */
export const eventHashOf = (event) => {
  const { eventHash: _hash, signature: _signature, ...covered } = event
  return sha256Hex(EventHashDomain + canonicalJson(covered))
}

/** @param {unknown} event @returns {string | null} */
const eventShapeProblem = (event) => {
  if (!isRecord(event)) return "the event is not an object"
  if (!isSafeInteger(event.sequence)) return "sequence is not an integer"
  for (const field of ["event_id", "public_id", "type", "occurred_at"]) {
    if (typeof event[field] !== "string") return `${field} is not a string`
  }
  if (!isRecord(event.payload)) return "payload is not an object"
  if (event.previousEventHash !== null && typeof event.previousEventHash !== "string") return "previousEventHash is neither null nor a string"
  if (typeof event.eventHash !== "string" || !HexHashPattern.test(event.eventHash)) return "eventHash is not 64 lowercase hex"
  const signature = event.signature
  if (!isRecord(signature) || signature.alg !== "Ed25519" || typeof signature.kid !== "string" || typeof signature.sig !== "string") {
    return "signature is not { alg: \"Ed25519\", kid, sig }"
  }
  return null
}

/**
 * @typedef {{
 *   readonly sequence: number, readonly public_id: string, readonly type: string, readonly previousEventHash: string | null,
 *   readonly eventHash: string, readonly signature: { readonly kid: string, readonly sig: string }
 * }} WellFormedEvent
 */

/**
 * Checks a chain the way `verifyEventChain` of src/domain/EventVerify.ts does, and reports the same verdict
 * (the first failing sequence and its reason), plus each event's own checks for display: its hash
 * recomputed, its link to the event before it in the list, and its signature by a JWKS key.
 * @param {ReadonlyArray<unknown>} events
 * @param {unknown} jwks
 * @param {ChainOptions} [options]
 * @returns {Promise<ChainReport>}
 */
export const verifyEventChain = async (events, jwks, options = {}) => {
  const keys = await keysFromJwks(jwks)
  const anchor = options.anchor ?? { sequence: 0, eventHash: null }

  /** @type {Array<EventCheck>} */
  const checks = []
  /** @type {Array<{ readonly hash: string | undefined, readonly signature: boolean }>} */
  const computed = []
  for (const [index, candidate] of events.entries()) {
    const malformed = eventShapeProblem(candidate)
    const record = isRecord(candidate) ? candidate : {}
    const previous = index === 0 ? anchor : /** @type {JsonRecord} */ (isRecord(events[index - 1]) ? events[index - 1] : {})
    const linkOk = malformed === null && isSafeInteger(previous.sequence) && record.sequence === previous.sequence + 1 &&
      record.previousEventHash === previous.eventHash
    let hash
    let signature = false
    /** @type {string | null} */
    let kid = null
    if (malformed === null) {
      const event = /** @type {WellFormedEvent} */ (/** @type {unknown} */ (record))
      hash = await eventHashOf(record)
      kid = event.signature.kid
      const key = keys.get(kid)
      const sig = signatureBytes(event.signature.sig)
      const input = hashFromHex(event.eventHash)
      signature = key !== undefined && sig !== undefined && input !== undefined && (await ed25519Verify(key, sig, input))
    }
    computed.push({ hash, signature })
    checks.push({
      index,
      sequence: record.sequence,
      type: record.type,
      malformed,
      hash_ok: hash !== undefined && hash === record.eventHash,
      link_ok: linkOk,
      signature_ok: signature,
      kid
    })
  }

  /** @type {ChainHead} */
  let previous = anchor
  /** @param {number} sequence @param {ChainFailureReason} reason @param {string} detail @returns {ChainReport} */
  const fail = (sequence, reason, detail) =>
    ({ ok: false, sequence, reason, detail, verified: previous.sequence - anchor.sequence, events: checks })
  /** @type {Set<string>} */
  const kids = new Set()
  for (const [index, candidate] of events.entries()) {
    const expected = previous.sequence + 1
    const check = /** @type {EventCheck} */ (checks[index])
    if (check.malformed !== null) return fail(expected, "malformed-event", check.malformed)
    const event = /** @type {WellFormedEvent} */ (candidate)
    if (options.publicId !== undefined && event.public_id !== options.publicId) {
      return fail(expected, "wrong-determination", `event belongs to ${String(event.public_id)}, not ${options.publicId}`)
    }
    if (event.sequence !== expected) {
      return fail(expected, "sequence-mismatch", `expected sequence ${expected}, found ${event.sequence}: an event is missing or out of order`)
    }
    if (event.previousEventHash !== previous.eventHash) {
      return fail(expected, "broken-link", `previousEventHash does not match the eventHash of sequence ${previous.sequence}`)
    }
    const recomputed = computed[index]?.hash
    if (recomputed !== event.eventHash) {
      return fail(expected, "hash-mismatch", `eventHash ${event.eventHash} does not match the content (recomputed ${String(recomputed)})`)
    }
    if (!keys.has(event.signature.kid)) return fail(expected, "unknown-kid", `kid ${event.signature.kid} is not in the JWKS`)
    if (computed[index]?.signature !== true) return fail(expected, "bad-signature", `the signature does not verify with key ${event.signature.kid}`)
    kids.add(event.signature.kid)
    previous = { sequence: expected, eventHash: event.eventHash }
  }

  const head = options.head
  if (head !== undefined && (head.sequence !== previous.sequence || head.eventHash !== previous.eventHash)) {
    if (head.sequence > previous.sequence) {
      return fail(previous.sequence + 1, "head-mismatch", `the chain ends at ${previous.sequence} but the head is ${head.sequence}: events are missing`)
    }
    return head.sequence < previous.sequence
      ? fail(head.sequence + 1, "head-mismatch", `the chain runs past the head (${head.sequence}) to ${previous.sequence}`)
      : fail(head.sequence, "head-mismatch", `the head's eventHash ${String(head.eventHash)} is not the eventHash of sequence ${head.sequence}`)
  }
  return { ok: true, count: previous.sequence - anchor.sequence, head: previous, kids: [...kids], events: checks }
}

// ---------------------------------------------------------------------------------------------------
// Merkle tree (RFC 9162 §2.1; src/log/Merkle.ts).

/** SHA-256(0x00 ‖ entry). @param {Uint8Array} entry */
export const leafHash = (entry) => sha256(concat(Uint8Array.of(0x00), entry))

/** SHA-256(0x01 ‖ left ‖ right). @param {Uint8Array} left @param {Uint8Array} right */
export const nodeHash = (left, right) => sha256(concat(Uint8Array.of(0x01), left, right))

/**
 * RFC 9162 §2.1.3.2: does `path` prove `leaf` at `index` in the tree of `size` leaves with `root`?
 * @param {{ readonly index: number, readonly size: number, readonly leaf: Uint8Array, readonly path: ReadonlyArray<Uint8Array>, readonly root: Uint8Array }} proof
 */
export const verifyInclusion = async ({ index, size, leaf, path, root }) => {
  if (!isSafeInteger(index) || !isSafeInteger(size) || index < 0 || index >= size) return false
  let fn = index
  let sn = size - 1
  let r = leaf
  for (const p of path) {
    if (sn === 0) return false
    if (fn % 2 === 1 || fn === sn) {
      r = await nodeHash(p, r)
      while (fn % 2 === 0 && fn !== 0) {
        fn = Math.floor(fn / 2)
        sn = Math.floor(sn / 2)
      }
    } else {
      r = await nodeHash(r, p)
    }
    fn = Math.floor(fn / 2)
    sn = Math.floor(sn / 2)
  }
  return sn === 0 && bytesEqual(r, root)
}

// ---------------------------------------------------------------------------------------------------
// C2SP signed notes and checkpoints (src/log/Note.ts, src/log/Checkpoint.ts).

const Ed25519SignatureType = 0x01
const SignatureLinePrefix = "\u2014 "
const MaxNoteSignatures = 100
const ControlCharacter = /[\u0000-\u0009\u000b-\u001f]/

/** @param {string} name */
const isValidKeyName = (name) =>
  name.length > 0 && !/[\p{White_Space}+]/u.test(name) && !hasLoneSurrogate(name) && !ControlCharacter.test(name)

/** Key ID = SHA-256(name ‖ 0x0A ‖ 0x01 ‖ public key)[:4]. @param {string} name @param {Uint8Array} raw */
const noteKeyId = async (name, raw) => (await sha256(concat(utf8(name), Uint8Array.of(0x0a, Ed25519SignatureType), raw))).subarray(0, 4)

/**
 * `<name>+<8 hex key ID>+<base64(0x01 ‖ public key)>`, checked: name, ID, type, length and matching ID.
 * @param {unknown} verifierKey
 * @returns {Promise<Checked<NoteVerifier>>}
 */
export const parseVerifierKey = async (verifierKey) => {
  if (typeof verifierKey !== "string") return refuse("the verifier key is not a string")
  const first = verifierKey.indexOf("+")
  const second = verifierKey.indexOf("+", first + 1)
  if (first < 0 || second < 0) return refuse("a verifier key is <name>+<key ID>+<base64 key>")
  const name = verifierKey.slice(0, first)
  const id = verifierKey.slice(first + 1, second)
  const key = verifierKey.slice(second + 1)
  if (!isValidKeyName(name)) return refuse(`${JSON.stringify(name)} is not a valid key name`)
  if (!/^[0-9a-f]{8}$/.test(id)) return refuse("the key ID is not 8 lowercase hex characters")
  const typed = decodeStdBase64(key)
  if (typed === undefined) return refuse("the key is not standard base64")
  if (typed[0] !== Ed25519SignatureType) return refuse(`signature type ${typed[0] ?? "(none)"} is not Ed25519 (1)`)
  if (typed.length !== 33) return refuse("an Ed25519 verifier key holds 32 bytes after its type")
  const raw = typed.subarray(1)
  const keyId = await noteKeyId(name, raw)
  if (hexOf(keyId) !== id) return refuse(`key ID ${id} is not the ID of this name and key`)
  if ((await ed25519Key(raw)) === null) return refuse("the key is not a usable Ed25519 public key")
  return accept({ name, keyId, publicKey: raw })
}

/**
 * A note split into its text and well-formed signature lines; nothing verified yet.
 * @param {unknown} note
 * @returns {Checked<{ readonly text: string, readonly signatures: ReadonlyArray<{ readonly name: string, readonly keyId: Uint8Array, readonly signature: Uint8Array }> }>}
 */
const splitNote = (note) => {
  if (typeof note !== "string") return refuse("the note is not text")
  if (hasLoneSurrogate(note)) return refuse("the note is not valid UTF-8")
  if (ControlCharacter.test(note)) return refuse("the note holds a control character other than newline")
  const split = note.lastIndexOf("\n\n")
  if (split < 0) return refuse("the note has no blank line before its signatures")
  const text = note.slice(0, split + 1)
  const block = note.slice(split + 2)
  if (block.length === 0 || !block.endsWith("\n")) return refuse("the signature block is empty or does not end in a newline")
  const lines = block.slice(0, -1).split("\n")
  if (lines.length > MaxNoteSignatures) return refuse(`the note has more than ${MaxNoteSignatures} signatures`)
  const signatures = []
  for (const [i, line] of lines.entries()) {
    if (!line.startsWith(SignatureLinePrefix)) return refuse(`signature line ${i + 1} does not start with "— "`)
    const rest = line.slice(SignatureLinePrefix.length)
    const space = rest.indexOf(" ")
    if (space < 0) return refuse(`signature line ${i + 1} is not "— <name> <signature>"`)
    const name = rest.slice(0, space)
    const decoded = decodeStdBase64(rest.slice(space + 1))
    if (!isValidKeyName(name)) return refuse(`signature line ${i + 1} has an invalid key name`)
    if (decoded === undefined || decoded.length < 5) return refuse(`signature line ${i + 1} does not hold base64 of a key ID and a signature`)
    signatures.push({ name, keyId: decoded.subarray(0, 4), signature: decoded.subarray(4) })
  }
  return accept({ text, signatures })
}

/**
 * Opens a note with one known key: other keys' signatures are ignored, every signature by this key
 * must verify, and there must be one.
 * @param {unknown} note
 * @param {NoteVerifier} verifier
 * @returns {Promise<Checked<string>>}
 */
const openNote = async (note, verifier) => {
  const split = splitNote(note)
  if (!split.ok) return split
  const { text, signatures } = split.value
  const label = `${verifier.name}+${hexOf(verifier.keyId)}`
  const mine = signatures.filter((s) => s.name === verifier.name && bytesEqual(s.keyId, verifier.keyId))
  if (mine.length === 0) return refuse(`the note has no signature by ${label}`)
  const key = await ed25519Key(verifier.publicKey)
  for (const { signature } of mine) {
    if (key === null || signature.length !== 64 || !(await ed25519Verify(key, signature, utf8(text)))) {
      return refuse(`a signature by ${label} does not verify`)
    }
  }
  return accept(text)
}

const SizePattern = /^(0|[1-9][0-9]*)$/

/** `<origin>\n<size>\n<base64 root>\n[extensions]`. @param {string} text @returns {Checked<Checkpoint>} */
const parseCheckpoint = (text) => {
  if (!text.endsWith("\n")) return refuse("the checkpoint does not end in a newline")
  const [origin, size, root, ...extensions] = text.slice(0, -1).split("\n")
  if (origin === undefined || size === undefined || root === undefined) return refuse("a checkpoint has at least three lines")
  if (origin.length === 0) return refuse("the origin line is empty")
  if (!SizePattern.test(size) || !Number.isSafeInteger(Number(size))) return refuse(`tree size ${JSON.stringify(size)} is not a canonical decimal`)
  const hash = decodeStdBase64(root)
  if (hash === undefined || hash.length !== 32) return refuse("the root hash is not base64 of 32 bytes")
  if (extensions.some((line) => line.length === 0)) return refuse("an extension line is empty")
  return accept({ origin, size: Number(size), root: hash, extensions })
}

// ---------------------------------------------------------------------------------------------------
// C2SP tlog-cosignature, Ed25519 cosignature/v1 (src/log/Cosignature.ts): witnesses' lines on a checkpoint.

const CosignatureV1Type = 0x04
const MaxFutureSkewSeconds = 60

/** Key ID = SHA-256(name ‖ 0x0A ‖ 0x04 ‖ public key)[:4]. @param {string} name @param {Uint8Array} raw */
const cosignatureKeyId = async (name, raw) => (await sha256(concat(utf8(name), Uint8Array.of(0x0a, CosignatureV1Type), raw))).subarray(0, 4)

/**
 * `<name>+<8 hex key ID>+<base64(0x04 ‖ public key)>`, checked as parseVerifierKey checks a log key.
 * @param {unknown} verifierKey
 * @returns {Promise<Checked<NoteVerifier>>}
 */
export const parseCosignerKey = async (verifierKey) => {
  if (typeof verifierKey !== "string") return refuse("the witness key is not a string")
  const first = verifierKey.indexOf("+")
  const second = verifierKey.indexOf("+", first + 1)
  if (first < 0 || second < 0) return refuse("a witness key is <name>+<key ID>+<base64 key>")
  const name = verifierKey.slice(0, first)
  const id = verifierKey.slice(first + 1, second)
  const key = verifierKey.slice(second + 1)
  if (!isValidKeyName(name)) return refuse(`${JSON.stringify(name)} is not a valid key name`)
  if (!/^[0-9a-f]{8}$/.test(id)) return refuse("the key ID is not 8 lowercase hex characters")
  const typed = decodeStdBase64(key)
  if (typed === undefined) return refuse("the key is not standard base64")
  if (typed[0] !== CosignatureV1Type) return refuse(`signature type ${typed[0] ?? "(none)"} is not an Ed25519 cosignature/v1 key (4)`)
  if (typed.length !== 33) return refuse("an Ed25519 witness key holds 32 bytes after its type")
  const raw = typed.subarray(1)
  const keyId = await cosignatureKeyId(name, raw)
  if (hexOf(keyId) !== id) return refuse(`key ID ${id} is not the ID of this name and key`)
  if ((await ed25519Key(raw)) === null) return refuse("the key is not a usable Ed25519 public key")
  return accept({ name, keyId, publicKey: raw })
}

/**
 * A quorum of pinned witnesses must have a valid cosignature on the note; a pinned witness's line that
 * does not verify, or is dated more than 60 s after `nowSeconds`, fails the check. Lines by other keys
 * are ignored.
 * @param {unknown} note
 * @param {WitnessPolicy} policy
 * @returns {Promise<{ readonly ok: boolean, readonly detail: string }>}
 */
export const checkWitnessQuorum = async (note, policy) => {
  /** @type {Array<NoteVerifier>} */
  const verifiers = []
  for (const witness of policy.witnesses ?? []) {
    const parsed = await parseCosignerKey(witness)
    if (!parsed.ok) return { ok: false, detail: `the witness key ${witness} is not usable: ${parsed.detail}` }
    verifiers.push(parsed.value)
  }
  const quorum = policy.quorum ?? verifiers.length
  if (!isSafeInteger(quorum) || quorum < 1 || quorum > verifiers.length) {
    return { ok: false, detail: `the quorum ${shown(policy.quorum)} is not between 1 and the ${verifiers.length} pinned witness(es)` }
  }
  const nowSeconds = policy.nowSeconds ?? Math.floor(Date.now() / 1000)
  const split = splitNote(note)
  if (!split.ok) return { ok: false, detail: split.detail }
  const { text, signatures } = split.value
  /** @type {Array<string>} */
  const valid = []
  /** @type {Array<string>} */
  const refused = []
  for (const witness of verifiers) {
    const label = `${witness.name}+${hexOf(witness.keyId)}`
    const key = await ed25519Key(witness.publicKey)
    let good = false
    for (const line of signatures.filter((s) => s.name === witness.name && bytesEqual(s.keyId, witness.keyId))) {
      if (line.signature.length !== 72) {
        refused.push(`the cosignature by ${label} is malformed: a cosignature/v1 holds 8 timestamp bytes and 64 signature bytes, not ${line.signature.length}`)
        continue
      }
      const stamp = new DataView(line.signature.buffer, line.signature.byteOffset, 8).getBigUint64(0)
      if (stamp > BigInt(Number.MAX_SAFE_INTEGER)) {
        refused.push(`the cosignature by ${label} is malformed: the cosignature's timestamp ${stamp} is out of range`)
        continue
      }
      const timestamp = Number(stamp)
      const message = utf8(`cosignature/v1\ntime ${timestamp}\n${text}`)
      if (key === null || !(await ed25519Verify(key, line.signature.subarray(8), message))) {
        refused.push(`the cosignature by ${label} does not verify`)
        continue
      }
      if (timestamp > nowSeconds + MaxFutureSkewSeconds) {
        refused.push(`the cosignature by ${label} is dated ${timestamp}, more than ${MaxFutureSkewSeconds} s in the future`)
        continue
      }
      good = true
    }
    if (good) valid.push(witness.name)
  }
  if (refused.length > 0) return { ok: false, detail: refused.join("; ") }
  const names = valid.length === 0 ? "none" : valid.join(", ")
  if (valid.length < quorum) {
    return { ok: false, detail: `${valid.length} of the ${verifiers.length} pinned witnesses cosigned the checkpoint (${names}); the quorum is ${quorum}` }
  }
  return { ok: true, detail: `${valid.length} of ${verifiers.length} pinned witnesses cosigned the checkpoint (${names}); the quorum is ${quorum}` }
}

/** The checkpoint a note states, before checking its signature. @param {unknown} note @returns {Checked<Checkpoint>} */
export const peekCheckpoint = (note) => {
  const split = splitNote(note)
  return split.ok ? parseCheckpoint(split.value.text) : split
}

/**
 * Verifies the checkpoint note with the log's key, then parses it; its origin must be the key's name.
 * @param {unknown} note
 * @param {NoteVerifier} verifier
 * @returns {Promise<Checked<Checkpoint>>}
 */
export const openCheckpoint = async (note, verifier) => {
  const text = await openNote(note, verifier)
  if (!text.ok) return text
  const checkpoint = parseCheckpoint(text.value)
  if (!checkpoint.ok) return checkpoint
  if (checkpoint.value.origin !== verifier.name) {
    return refuse(`the checkpoint's origin ${checkpoint.value.origin} is not the key's name ${verifier.name}`)
  }
  return checkpoint
}

// ---------------------------------------------------------------------------------------------------
// Receipt proof bundle (docs/API.md §11.7, §11.8; src/client/log.ts, src/log/Entries.ts).

const ReceiptEntryType = "pv.log.receipt.v1"
const EventEntryType = "pv.log.event.v1"
const ReceiptSignatureDomain = "pv-receipt-v1\n"
const MaxEntrySize = 0xffff

/** @param {JsonRecord} value @param {ReadonlyArray<string>} members */
const hasExactly = (value, members) => {
  const keys = Object.keys(value)
  return keys.length === members.length && members.every((member) => Object.hasOwn(value, member))
}

/** @param {unknown} u @returns {u is string} */
const nonEmpty = (u) => typeof u === "string" && u.length > 0

/** Exactly one of the two entry shapes. @param {unknown} value @returns {Checked<JsonRecord>} */
const parseLogEntry = (value) => {
  if (!isRecord(value)) return refuse("the log entry is not an object")
  if (value.type === ReceiptEntryType) {
    if (!hasExactly(value, ["type", "receipt_id", "receipt_digest", "created_at"])) {
      return refuse("a receipt entry has exactly type, receipt_id, receipt_digest and created_at")
    }
    if (!nonEmpty(value.receipt_id) || !nonEmpty(value.created_at)) return refuse("receipt_id and created_at are non-empty strings")
    if (typeof value.receipt_digest !== "string" || !HexHashPattern.test(value.receipt_digest)) return refuse("receipt_digest is not 64 lowercase hex")
    return accept(value)
  }
  if (value.type === EventEntryType) {
    if (!hasExactly(value, ["type", "public_id", "sequence", "eventHash"])) {
      return refuse("an event entry has exactly type, public_id, sequence and eventHash")
    }
    if (!nonEmpty(value.public_id)) return refuse("public_id is a non-empty string")
    if (!isSafeInteger(value.sequence) || value.sequence < 1) return refuse("sequence is a positive integer")
    if (typeof value.eventHash !== "string" || !HexHashPattern.test(value.eventHash)) return refuse("eventHash is not 64 lowercase hex")
    return accept(value)
  }
  return refuse(`the entry type ${JSON.stringify(value.type)} is neither ${ReceiptEntryType} nor ${EventEntryType}`)
}

/** @param {BundleStep} step @param {boolean} ok @param {string} detail @returns {BundleStepResult} */
const stepOf = (step, ok, detail) => ({ step, ok, checked: true, detail })

/** @param {unknown} value @returns {Promise<string | undefined>} */
const digestOrUndefined = async (value) => {
  try {
    return await digestOf(value)
  } catch (error) {
    if (error instanceof TypeError) return undefined
    throw error
  }
}

/** @param {unknown} receipt @returns {Promise<BundleStepResult>} */
const digestStep = async (receipt) => {
  /** @param {string} detail */
  const fail = (detail) => stepOf("digest", false, detail)
  if (!isRecord(receipt)) return fail("receipt is not an object")
  const snapshot = receipt.snapshot_payload
  if (!isRecord(snapshot)) return fail("receipt.snapshot_payload is not an object")
  if (typeof receipt.receipt_digest !== "string") return fail("receipt.receipt_digest is not a string")
  const recomputed = await digestOrUndefined(snapshot)
  if (recomputed === undefined) return fail("snapshot_payload has no canonical JSON form")
  if (recomputed !== receipt.receipt_digest) {
    return fail(`receipt_digest ${receipt.receipt_digest} is not the digest of snapshot_payload (recomputed ${recomputed})`)
  }
  for (const [field, value] of Object.entries(snapshot)) {
    if (!Object.hasOwn(receipt, field)) return fail(`receipt.${field} is missing (snapshot_payload has it)`)
    const mine = await digestOrUndefined(receipt[field])
    if (mine === undefined) return fail(`receipt.${field} has no canonical JSON form`)
    if (mine !== (await digestOf(value))) return fail(`receipt.${field} differs from snapshot_payload.${field}`)
  }
  return stepOf("digest", true, `receipt_digest ${recomputed} is the digest of snapshot_payload, and the receipt's fields match it`)
}

/** @param {unknown} receipt @param {unknown} logEntry @returns {BundleStepResult} */
const entryStep = (receipt, logEntry) => {
  /** @param {string} detail */
  const fail = (detail) => stepOf("entry", false, detail)
  const entry = parseLogEntry(logEntry)
  if (!entry.ok) return fail(`log_entry: ${entry.detail}`)
  if (entry.value.type !== ReceiptEntryType) return fail(`log_entry is a ${String(entry.value.type)} entry, not ${ReceiptEntryType}`)
  if (!isRecord(receipt)) return fail("receipt is not an object")
  for (const field of ["receipt_id", "receipt_digest", "created_at"]) {
    if (entry.value[field] !== receipt[field]) {
      return fail(`log_entry.${field} ${shown(entry.value[field])} is not the receipt's ${shown(receipt[field])}`)
    }
  }
  return stepOf("entry", true, `log_entry is the ${ReceiptEntryType} entry of receipt ${String(entry.value.receipt_id)}`)
}

/** @param {unknown} logEntry @returns {Promise<{ readonly result: BundleStepResult, readonly leaf?: Uint8Array }>} */
const leafStep = async (logEntry) => {
  /** @param {string} detail */
  const fail = (detail) => ({ result: stepOf("leaf", false, detail) })
  if (!isRecord(logEntry)) return fail("log_entry is not an object")
  let bytes
  try {
    bytes = utf8(canonicalJson(logEntry))
  } catch {
    return fail("log_entry has no canonical JSON form")
  }
  if (bytes.length > MaxEntrySize) return fail(`log_entry is ${bytes.length} bytes; log entries are at most ${MaxEntrySize}`)
  const leaf = await leafHash(bytes)
  return { result: stepOf("leaf", true, `leaf hash ${hexOf(leaf)} = SHA-256(0x00 ‖ JCS(log_entry))`), leaf }
}

/** @param {JsonRecord} bundle @param {Uint8Array | undefined} leaf @returns {Promise<BundleStepResult>} */
const inclusionStep = async (bundle, leaf) => {
  /** @param {string} detail */
  const fail = (detail) => stepOf("inclusion", false, detail)
  if (leaf === undefined) return fail("there is no leaf hash to prove (see the leaf step)")
  const index = bundle.leaf_index
  if (!isSafeInteger(index) || index < 0) return fail(`leaf_index ${shown(index)} is not a non-negative integer`)
  const path = hashesFromHex(bundle.inclusion_path)
  if (path === undefined) return fail("inclusion_path is not an array of 64-hex hashes")
  const checkpoint = peekCheckpoint(bundle.checkpoint)
  if (!checkpoint.ok) return fail(`checkpoint: ${checkpoint.detail}`)
  const { size, root } = checkpoint.value
  if (index >= size) return fail(`leaf_index ${index} is not below the checkpoint's tree size ${size}`)
  return (await verifyInclusion({ index, size, leaf, path, root }))
    ? stepOf("inclusion", true, `leaf ${index} is in the tree of size ${size} with root ${hexOf(root)}`)
    : fail(`inclusion_path does not lead from leaf ${index} to the root of the tree of size ${size}`)
}

/** @param {JsonRecord} bundle @param {string | undefined} pinned @returns {Promise<BundleStepResult>} */
const checkpointStep = async (bundle, pinned) => {
  /** @param {string} detail */
  const fail = (detail) => stepOf("checkpoint_signature", false, detail)
  const source = pinned === undefined ? "the bundle's own verifier_key (not pinned)" : "the pinned verifier key"
  const verifier = await parseVerifierKey(pinned ?? bundle.verifier_key)
  if (!verifier.ok) return fail(`${source} is not usable: ${verifier.detail}`)
  const opened = await openCheckpoint(bundle.checkpoint, verifier.value)
  if (!opened.ok) return fail(`with ${source}: ${opened.detail}`)
  return stepOf("checkpoint_signature", true, `checkpoint of ${opened.value.origin} at size ${opened.value.size} is signed by ${source}`)
}

/** @param {JsonRecord} bundle @param {WitnessPolicy} policy @returns {Promise<BundleStepResult>} */
const witnessStep = async (bundle, policy) => {
  const verdict = await checkWitnessQuorum(bundle.checkpoint, policy)
  return stepOf("witness_cosignatures", verdict.ok, verdict.detail)
}

/** @param {ReceiptKeys} keys @returns {Promise<Map<string, CryptoKey>>} */
const keyMapOf = async (keys) => {
  if (keys instanceof Uint8Array) {
    if (keys.length !== 32) return new Map()
    const key = await ed25519Key(keys)
    return key === null ? new Map() : new Map([[await kidOf(keys), key]])
  }
  return keysFromJwks(keys)
}

/**
 * @param {unknown} receipt
 * @param {ReceiptKeys | undefined} keys
 * @param {"pinned" | "bundle" | "none"} source
 * @returns {Promise<BundleStepResult>}
 */
const receiptSignatureStep = async (receipt, keys, source) => {
  if (keys === undefined) {
    return { step: "receipt_signature", ok: false, checked: false, detail: "not checked: no receipt key was supplied and the bundle carries none" }
  }
  const described = source === "pinned" ? "the supplied receipt keys" : "the bundle's own receipt_key (not pinned)"
  const map = await keyMapOf(keys)
  /** @param {string} detail */
  const fail = (detail) => stepOf("receipt_signature", false, `${detail} (keys: ${described})`)
  if (map.size === 0) return stepOf("receipt_signature", false, `${described} hold no usable Ed25519 key`)
  if (!isRecord(receipt)) return stepOf("receipt_signature", false, "receipt is not an object")
  const digest = receipt.receipt_digest
  const signature = receipt.signature
  if (typeof digest !== "string" || !HexHashPattern.test(digest)) return fail("receipt_digest is not 64 lowercase hex")
  if (!isRecord(signature) || signature.alg !== "Ed25519" || typeof signature.kid !== "string" || typeof signature.sig !== "string") {
    return fail("signature is not { alg: \"Ed25519\", kid, sig }")
  }
  const key = map.get(signature.kid)
  if (key === undefined) return fail(`no receipt key has kid ${signature.kid}`)
  const sig = signatureBytes(signature.sig)
  if (sig === undefined) return fail("sig is not 64 bytes of unpadded base64url")
  return (await ed25519Verify(key, sig, utf8(ReceiptSignatureDomain + digest)))
    ? stepOf("receipt_signature", true, `receipt.signature verifies under kid ${signature.kid} from ${described}`)
    : fail(`the signature does not verify with key ${signature.kid}`)
}

/**
 * Checks a receipt proof bundle step by step, as `verifyReceiptBundle` of src/client/log.ts does:
 * digest → entry → leaf → inclusion → checkpoint_signature → [witness_cosignatures] → receipt_signature. Every step runs;
 * `failed_step` names the first that ran and failed. Keys taken from the bundle itself prove only that
 * the bundle agrees with itself, and `keys` says so.
 * @param {unknown} bundle
 * @param {BundleOptions} [options]
 * @returns {Promise<BundleVerdict>}
 */
export const verifyReceiptBundle = async (bundle, options = {}) => {
  const record = isRecord(bundle) ? bundle : {}
  const receipt = record.receipt
  const bundleKey = isRecord(record.receipt_key) ? { keys: [record.receipt_key] } : undefined
  /** @type {"pinned" | "bundle" | "none"} */
  const receiptKeySource = options.receiptKeys !== undefined ? "pinned" : bundleKey !== undefined ? "bundle" : "none"
  const withWitnesses = options.witnesses !== undefined && options.witnesses.length > 0
  /** @type {Array<BundleStepResult>} */
  let steps
  if (isRecord(bundle)) {
    const leaf = await leafStep(record.log_entry)
    steps = [
      await digestStep(receipt),
      entryStep(receipt, record.log_entry),
      leaf.result,
      await inclusionStep(record, leaf.leaf),
      await checkpointStep(record, options.verifierKey),
      ...(withWitnesses ? [await witnessStep(record, options)] : []),
      await receiptSignatureStep(receipt, options.receiptKeys ?? bundleKey, receiptKeySource)
    ]
  } else {
    steps = BundleSteps.filter((step) => withWitnesses || step !== "witness_cosignatures").map((step) => stepOf(step, false, "the bundle is not an object"))
  }
  const failed = steps.find((step) => step.checked && !step.ok)
  return {
    ok: steps.every((step) => step.ok),
    steps,
    ...(failed === undefined ? {} : { failed_step: failed.step }),
    not_checked: steps.filter((step) => !step.checked).map((step) => step.step),
    keys: { verifier_key: options.verifierKey === undefined ? "bundle" : "pinned", receipt_key: receiptKeySource }
  }
}
