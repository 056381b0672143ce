import { decode, encode, Tag } from "cbor2"
import { bytesEqual, isRecord, utf8Decode } from "./Bytes.js"
import { accept, refuse, type Checked } from "./Checked.js"

/**
 * COSE (RFC 9052) as docs/API.md "Evidence in standard encodings" uses it: a tagged COSE_Sign1 with
 * EdDSA, the RFC 9942 receipt labels (vds 395, vdp 396, RFC9162_SHA256 inclusion proofs) and the
 * RFC 9943 receipts label (394). CBOR is cbor2's, deterministic (RFC 8949 §4.2.1 core rules): the
 * service encodes that way, and a verifier refuses any other encoding of the same value, so each
 * receipt has one byte form. No Node: the page's bundle runs this too.
 */

export const CoseSign1Tag = 18
export const CoseAlgEdDSA = -8
export const CoseLabel = { alg: 1, contentType: 3, kid: 4, cwtClaims: 15, receipts: 394, vds: 395, vdp: 396 } as const
export const CwtClaim = { iss: 1, sub: 2, iat: 6 } as const
/** RFC 9942 §5: the RFC9162_SHA256 verifiable data structure and its inclusion proof label. */
export const VdsRfc9162Sha256 = 1
export const InclusionProofLabel = -1

export const CoseReceiptMediaType = "application/scitt-receipt+cose"
export const TransparentStatementMediaType = "application/scitt-statement+cose"
export const StatementContentType = "application/json"

/** Deterministically encoded CBOR. */
export const cborEncode = (value: unknown): Uint8Array => encode(value, { cde: true })

/** A plain Uint8Array view of bytes (a Node Buffer would be encoded as an object): what every bstr is given as. */
export const bstr = (bytes: Uint8Array): Uint8Array => new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length)

/**
 * CBOR that must be in its deterministic form: decoded (maps as Map, so integer labels stay integers),
 * then encoded again and compared, so a long form, an unsorted map or an indefinite length is refused.
 */
export const cborDecodeStrict = (bytes: Uint8Array): Checked<unknown> => {
  let value: unknown
  try {
    value = decode(bytes, { cde: true, preferMap: true, rejectDuplicateKeys: true })
  } catch (error) {
    return refuse(`not CBOR: ${error instanceof Error ? error.message : String(error)}`)
  }
  let again: Uint8Array
  try {
    again = cborEncode(value)
  } catch {
    return refuse("the CBOR holds a value with no deterministic encoding")
  }
  return bytesEqual(again, bytes) ? accept(value) : refuse("the CBOR is not in its deterministic encoding")
}

/** The COSE Sig_structure a COSE_Sign1 signs (RFC 9052 §4.4): ["Signature1", protected, h'' (no external AAD), payload]. */
export const sigStructure = (protectedBytes: Uint8Array, payload: Uint8Array): Uint8Array =>
  cborEncode(["Signature1", bstr(protectedBytes), new Uint8Array(0), bstr(payload)])

/** A tagged COSE_Sign1, as a value to encode. */
export const coseSign1 = (protectedBytes: Uint8Array, unprotected: Map<number, unknown>, payload: Uint8Array | null, signature: Uint8Array): Tag =>
  new Tag(CoseSign1Tag, [bstr(protectedBytes), unprotected, payload === null ? null : bstr(payload), bstr(signature)])

export interface CoseSign1 {
  readonly protectedBytes: Uint8Array
  readonly protected: ReadonlyMap<unknown, unknown>
  readonly unprotected: ReadonlyMap<unknown, unknown>
  readonly payload: Uint8Array | null
  readonly signature: Uint8Array
}

const isBytes = (u: unknown): u is Uint8Array => u instanceof Uint8Array

/** A tagged COSE_Sign1 (tag 18) in deterministic CBOR, its protected header decoded; nothing is verified. */
export const parseCoseSign1 = (bytes: unknown): Checked<CoseSign1> => {
  if (!isBytes(bytes)) return refuse("the COSE object is not bytes")
  const decoded = cborDecodeStrict(bytes)
  if (!decoded.ok) return decoded
  const value = decoded.value
  if (!(value instanceof Tag) || Number(value.tag) !== CoseSign1Tag) return refuse("not a tagged COSE_Sign1 (tag 18)")
  const parts = value.contents
  if (!Array.isArray(parts) || parts.length !== 4) return refuse("a COSE_Sign1 is an array of 4")
  const [protectedBytes, unprotected, payload, signature] = parts as Array<unknown>
  if (!isBytes(protectedBytes)) return refuse("the protected header is not a byte string")
  if (!(unprotected instanceof Map)) return refuse("the unprotected header is not a map")
  if (payload !== null && !isBytes(payload)) return refuse("the payload is neither a byte string nor nil")
  if (!isBytes(signature) || signature.length !== 64) return refuse("the signature is not 64 bytes (Ed25519)")
  const header = cborDecodeStrict(protectedBytes)
  if (!header.ok) return refuse(`the protected header: ${header.detail}`)
  if (!(header.value instanceof Map)) return refuse("the protected header is not a map")
  return accept({ protectedBytes, protected: header.value, unprotected, payload, signature })
}

/** The map holds exactly these labels. */
export const hasExactLabels = (map: ReadonlyMap<unknown, unknown>, labels: ReadonlyArray<number>): boolean =>
  map.size === labels.length && labels.every((label) => map.has(label))

const isUint = (u: unknown): u is number => Number.isSafeInteger(u) && (u as number) >= 0

export interface InclusionProofValue {
  readonly treeSize: number
  readonly leafIndex: number
  readonly path: ReadonlyArray<Uint8Array>
}

/** RFC 9942 RFC9162_SHA256 inclusion proof: bstr .cbor [tree_size, leaf_index, [* bstr(32)]]. */
export const encodeInclusionProof = (proof: InclusionProofValue): Uint8Array => cborEncode([proof.treeSize, proof.leafIndex, proof.path.map(bstr)])

export const parseInclusionProof = (bytes: unknown): Checked<InclusionProofValue> => {
  if (!isBytes(bytes)) return refuse("the inclusion proof is not a byte string")
  const decoded = cborDecodeStrict(bytes)
  if (!decoded.ok) return refuse(`the inclusion proof: ${decoded.detail}`)
  const value = decoded.value
  if (!Array.isArray(value) || value.length !== 3) return refuse("the inclusion proof is not [tree_size, leaf_index, inclusion_path]")
  const [treeSize, leafIndex, path] = value as Array<unknown>
  if (!isUint(treeSize) || !isUint(leafIndex)) return refuse("tree_size and leaf_index are not unsigned integers")
  if (!Array.isArray(path) || !path.every((h) => isBytes(h) && h.length === 32)) return refuse("inclusion_path is not an array of 32-byte hashes")
  return accept({ treeSize, leafIndex, path: path as Array<Uint8Array> })
}

export interface CoseReceiptValue extends CoseSign1 {
  readonly kid: Uint8Array
  readonly proof: InclusionProofValue
}

/**
 * A COSE Receipt exactly as docs/API.md specifies it: protected {1: -8, 4: 4-byte kid, 395: 1},
 * unprotected {396: {-1: [one inclusion proof]}}, payload nil (detached: the root), a 64-byte signature.
 */
export const parseCoseReceipt = (bytes: unknown): Checked<CoseReceiptValue> => {
  const sign1 = parseCoseSign1(bytes)
  if (!sign1.ok) return sign1
  const { protected: header, unprotected, payload } = sign1.value
  if (!hasExactLabels(header, [CoseLabel.alg, CoseLabel.kid, CoseLabel.vds])) return refuse("the protected header is not exactly {1: alg, 4: kid, 395: vds}")
  if (header.get(CoseLabel.alg) !== CoseAlgEdDSA) return refuse("alg is not -8 (EdDSA)")
  if (header.get(CoseLabel.vds) !== VdsRfc9162Sha256) return refuse("vds is not 1 (RFC9162_SHA256)")
  const kid = header.get(CoseLabel.kid)
  if (!isBytes(kid) || kid.length !== 4) return refuse("kid is not the log key's 4-byte key ID")
  if (payload !== null) return refuse("the payload is not nil (a receipt's payload, the root, is detached)")
  if (!hasExactLabels(unprotected, [CoseLabel.vdp])) return refuse("the unprotected header is not exactly {396: vdp}")
  const vdp = unprotected.get(CoseLabel.vdp)
  if (!(vdp instanceof Map) || !hasExactLabels(vdp, [InclusionProofLabel])) return refuse("vdp is not exactly {-1: inclusion proofs}")
  const proofs = vdp.get(InclusionProofLabel) as unknown
  if (!Array.isArray(proofs) || proofs.length !== 1) return refuse("vdp -1 does not hold exactly one inclusion proof")
  const proof = parseInclusionProof(proofs[0])
  if (!proof.ok) return proof
  return accept({ ...sign1.value, kid, proof: proof.value })
}

export interface StatementClaims {
  readonly iss: string
  readonly sub: string
  readonly iat: number
}

export interface TransparentStatementValue extends CoseSign1 {
  readonly kid: string
  readonly claims: StatementClaims
  readonly payload: Uint8Array
  /** The embedded COSE Receipts' bytes (label 394). */
  readonly receipts: ReadonlyArray<Uint8Array>
}

/**
 * A Transparent Statement exactly as docs/API.md specifies it: protected {1: -8, 3: "application/json",
 * 4: kid (UTF-8 of the JWKS kid), 15: {1: iss, 2: sub, 6: iat}}, unprotected {394: [+ receipt]}, the payload attached.
 */
export const parseTransparentStatement = (bytes: unknown): Checked<TransparentStatementValue> => {
  const sign1 = parseCoseSign1(bytes)
  if (!sign1.ok) return sign1
  const { protected: header, unprotected, payload } = sign1.value
  if (!hasExactLabels(header, [CoseLabel.alg, CoseLabel.contentType, CoseLabel.kid, CoseLabel.cwtClaims])) {
    return refuse("the protected header is not exactly {1: alg, 3: content type, 4: kid, 15: CWT claims}")
  }
  if (header.get(CoseLabel.alg) !== CoseAlgEdDSA) return refuse("alg is not -8 (EdDSA)")
  if (header.get(CoseLabel.contentType) !== StatementContentType) return refuse(`the content type is not "${StatementContentType}"`)
  const kidBytes = header.get(CoseLabel.kid)
  const kid = isBytes(kidBytes) ? utf8Decode(kidBytes) : undefined
  if (kid === undefined || kid.length === 0) return refuse("kid is not the UTF-8 bytes of a key's kid")
  const claims = header.get(CoseLabel.cwtClaims)
  if (!(claims instanceof Map) || !hasExactLabels(claims, [CwtClaim.iss, CwtClaim.sub, CwtClaim.iat])) {
    return refuse("the CWT claims are not exactly {1: iss, 2: sub, 6: iat}")
  }
  const [iss, sub, iat] = [claims.get(CwtClaim.iss), claims.get(CwtClaim.sub), claims.get(CwtClaim.iat)]
  if (typeof iss !== "string" || typeof sub !== "string" || !isUint(iat)) return refuse("iss and sub are not text or iat is not an unsigned integer")
  if (payload === null) return refuse("the payload is detached; a transparent statement here carries the receipt")
  if (!hasExactLabels(unprotected, [CoseLabel.receipts])) return refuse("the unprotected header is not exactly {394: receipts}")
  const receipts = unprotected.get(CoseLabel.receipts)
  if (!Array.isArray(receipts) || receipts.length === 0 || !receipts.every(isBytes)) return refuse("394 is not a non-empty array of receipts (byte strings)")
  return accept({ ...sign1.value, kid, claims: { iss, sub, iat }, payload, receipts: receipts as Array<Uint8Array> })
}

/** The JSON payload of a statement, when it is UTF-8 JSON. */
export const statementJson = (payload: Uint8Array): Checked<Record<string, unknown>> => {
  const text = utf8Decode(payload)
  if (text === undefined) return refuse("the payload is not UTF-8")
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return refuse("the payload is not JSON")
  }
  return isRecord(value) ? accept(value) : refuse("the payload is not a JSON object")
}
