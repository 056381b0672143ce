import { base64Of, hashesFromHex, utf8 } from "../verify/Bytes.js"
import { canonicalJson } from "../verify/Jcs.js"
import {
  CoseAlgEdDSA,
  CoseLabel,
  coseSign1,
  bstr,
  cborEncode,
  CwtClaim,
  encodeInclusionProof,
  InclusionProofLabel,
  sigStructure,
  StatementContentType,
  VdsRfc9162Sha256
} from "../verify/Cose.js"
import { TlogProofHeader } from "../verify/TlogProof.js"
import { peekCheckpoint } from "./Checkpoint.js"
import type { NoteSigner } from "./Note.js"
import type { ReceiptProofBundle, SignedRelianceReceipt } from "./ReceiptProof.js"

/**
 * The §10 proof bundle's facts in the field's own encodings (docs/API.md "Evidence in standard
 * encodings"): a C2SP tlog-proof, an RFC 9942 COSE Receipt and an RFC 9943 Transparent Statement.
 * Pure: the signers are passed in. src/verify reads all three.
 */

const entryBytes = (bundle: ReceiptProofBundle): Uint8Array => utf8(canonicalJson(bundle.log_entry))

const pathOf = (bundle: ReceiptProofBundle): Array<Uint8Array> => {
  const path = hashesFromHex(bundle.inclusion_path)
  if (path === undefined) throw new TypeError("the bundle's inclusion path is not hex hashes")
  return path
}

const checkpointOf = (bundle: ReceiptProofBundle) => {
  const checkpoint = peekCheckpoint(bundle.checkpoint)
  if (!checkpoint.ok) throw new TypeError(`the bundle's checkpoint is malformed: ${checkpoint.detail}`)
  return checkpoint.value
}

/** C2SP tlog-proof@v1: header, extra (the entry bytes), index, the path a hash a line, an empty line, the checkpoint verbatim. */
export const tlogProofOf = (bundle: ReceiptProofBundle): string =>
  [
    TlogProofHeader,
    `extra ${base64Of(entryBytes(bundle))}`,
    `index ${bundle.leaf_index}`,
    ...pathOf(bundle).map(base64Of),
    "",
    bundle.checkpoint
  ].join("\n")

/**
 * RFC 9942 COSE Receipt: tag 18, protected {1: -8, 4: the log key ID, 395: 1}, unprotected
 * {396: {-1: [bstr .cbor [tree_size, leaf_index, path]]}}, payload nil, the log key's signature over
 * the Sig_structure with the checkpoint's root as the detached payload.
 */
export const coseReceiptOf = (bundle: ReceiptProofBundle, logKey: NoteSigner): Uint8Array => {
  const { size, root } = checkpointOf(bundle)
  const protectedBytes = cborEncode(new Map<number, unknown>([[CoseLabel.alg, CoseAlgEdDSA], [CoseLabel.kid, bstr(logKey.keyId)], [CoseLabel.vds, VdsRfc9162Sha256]]))
  const proof = encodeInclusionProof({ treeSize: size, leafIndex: bundle.leaf_index, path: pathOf(bundle) })
  const unprotected = new Map<number, unknown>([[CoseLabel.vdp, new Map([[InclusionProofLabel, [proof]]])]])
  return cborEncode(coseSign1(protectedBytes, unprotected, null, logKey.sign(sigStructure(protectedBytes, root))))
}

/** The receipt-signing key as a Transparent Statement needs it: its JWKS kid and a raw Ed25519 signature. */
export interface StatementSigner {
  readonly kid: string
  readonly sign: (input: Uint8Array) => Uint8Array
}

/**
 * RFC 9943 Transparent Statement: tag 18, protected {1: -8, 3: "application/json", 4: UTF-8 kid,
 * 15: {1: origin, 2: receipt_id, 6: created_at in Unix seconds}}, payload the JCS bytes of the receipt,
 * unprotected {394: [the COSE Receipt]}, signed by the receipt-signing key.
 */
export const transparentStatementOf = (receipt: SignedRelianceReceipt, coseReceipt: Uint8Array, origin: string, signer: StatementSigner): Uint8Array => {
  const claims = new Map<number, unknown>([
    [CwtClaim.iss, origin],
    [CwtClaim.sub, receipt.receipt_id],
    [CwtClaim.iat, Math.floor(Date.parse(receipt.created_at) / 1000)]
  ])
  const protectedBytes = cborEncode(new Map<number, unknown>([
    [CoseLabel.alg, CoseAlgEdDSA],
    [CoseLabel.contentType, StatementContentType],
    [CoseLabel.kid, utf8(signer.kid)],
    [CoseLabel.cwtClaims, claims]
  ]))
  const payload = utf8(canonicalJson(receipt))
  const unprotected = new Map<number, unknown>([[CoseLabel.receipts, [coseReceipt]]])
  return cborEncode(coseSign1(protectedBytes, unprotected, payload, signer.sign(sigStructure(protectedBytes, payload))))
}
