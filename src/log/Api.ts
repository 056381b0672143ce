import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { InvalidProofRequest, NotFound, RateLimited, Unavailable } from "../domain/Problem.js"
import { RelianceReceipt } from "../domain/Receipt.js"
import { EventJwk } from "../domain/TrustEvent.js"

const HexHash = Schema.String.annotate({ description: "SHA-256, 64 lowercase hex characters" })

export const LogKeyInfo = Schema.Struct({
  origin: Schema.String.annotate({ description: "The checkpoint origin line and note key name (PV_LOG_ORIGIN)" }),
  verifier_key: Schema.String.annotate({ description: "Note verifier key `<origin>+<8 hex key ID>+<base64(0x01 ‖ Ed25519 public key)>`" })
}).annotate({ identifier: "LogKey" })

export const InclusionProof = Schema.Struct({
  index: Schema.Int,
  tree_size: Schema.Int,
  leaf_hash: HexHash,
  inclusion_path: Schema.Array(HexHash)
}).annotate({ identifier: "InclusionProof", description: "RFC 9162 §2.1.3 inclusion proof" })

export const ConsistencyProof = Schema.Struct({
  first: Schema.Int,
  second: Schema.Int,
  consistency_path: Schema.Array(HexHash)
}).annotate({ identifier: "ConsistencyProof", description: "RFC 9162 §2.1.4 consistency proof" })

export const ReceiptLogEntry = Schema.Struct({
  type: Schema.Literal("pv.log.receipt.v1"),
  receipt_id: Schema.String,
  receipt_digest: Schema.String,
  created_at: Schema.String
}).annotate({ identifier: "ReceiptLogEntry", description: "The log entry of a receipt; its bytes are the UTF-8 of its RFC 8785 form" })

/** What GET /reliance-receipts/{id}/proof and MCP get_reliance_receipt (include_proof) return. */
export const ReceiptProofBundle = Schema.Struct({
  receipt: RelianceReceipt,
  log_entry: ReceiptLogEntry,
  leaf_index: Schema.Int,
  checkpoint: Schema.String.annotate({ description: "The signed checkpoint note (C2SP signed-note) the inclusion path leads to" }),
  inclusion_path: Schema.Array(HexHash),
  verifier_key: Schema.String.annotate({ description: "The log's note verifier key (pin it: GET /log/key)" }),
  receipt_key: Schema.optionalKey(EventJwk.annotate({ description: "The JWK of the receipt signature's kid (pin it: GET /events/keys)" }))
}).annotate({ identifier: "ReceiptProofBundle", description: "Everything needed to verify, offline, that a receipt is signed and logged" })

/** Query values arrive as text and are checked by the handler: docs/API.md §11.6 answers a bad one 400, not 422. */
const Param = (description: string) => Schema.optionalKey(Schema.String.annotate({ description }))

const Tile = Schema.Uint8Array.pipe(HttpApiSchema.asUint8Array({ contentType: "application/octet-stream" }))

const Note = Schema.String.pipe(HttpApiSchema.asText({ contentType: "text/plain; charset=utf-8" }))

/** Every log endpoint may answer these (the per-address limit, a database that is away). */
const groupErrors = [RateLimited, Unavailable] as const

const perAddress = "No credentials; limited per client address (PV_LOG_RATE_LIMIT_PER_MINUTE). Also served at /log/…"

/** The transparency log's endpoints, once: served under /api/v1 (LogApi) and at the root (RootLogApi). */
const checkpointEndpoint =
  HttpApiEndpoint.get("checkpoint", "/log/checkpoint", { success: Note, error: [NotFound, ...groupErrors] })
    .annotate(OpenApi.Summary, "The latest signed checkpoint of the transparency log")
    .annotate(OpenApi.Description,
      "A C2SP tlog-checkpoint (`<origin>\\n<tree size>\\n<base64 root hash>\\n`) in a C2SP signed-note with one Ed25519 " +
      "signature by the key of GET /log/key. The tree size never decreases; every checkpoint is consistent with every " +
      "earlier one (GET /log/proof/consistency). With witnesses configured (PV_LOG_WITNESSES), the newest checkpoint that a " +
      "quorum of them cosigned, with their C2SP cosignature/v1 lines after the log's own signature line (404 until one is). " + perAddress)

const keyEndpoint =
  HttpApiEndpoint.get("key", "/log/key", { success: LogKeyInfo, error: groupErrors })
    .annotate(OpenApi.Summary, "The log's origin and note verifier key")
    .annotate(OpenApi.Description, "Pin verifier_key once (e.g. in `pv log monitor`); checkpoints are signed by it. " + perAddress)

const policyEndpoint =
  HttpApiEndpoint.get("policy", "/log/policy", { success: Note, error: groupErrors })
    .annotate(OpenApi.Summary, "The deployment's witness policy (C2SP tlog-policy)")
    .annotate(OpenApi.Description,
      "`log <verifier key>`, one `witness <name> <vkey> <submission URL>` line per configured witness (PV_LOG_WITNESSES or " +
      "PV_LOG_WITNESS_POLICY), and the quorum /log/checkpoint meets: `quorum none` without witnesses, the witness itself for " +
      "one, else `group quorum all|any|<k> <names>` and `quorum quorum`. Give it to `pv verify-receipt --policy`, " +
      "`pv log monitor --policy` or the client module's verifiers (`policy`). " + perAddress)

const tileEndpoint =
  HttpApiEndpoint.get("tile", "/log/tile/*", { success: Tile, error: [NotFound, ...groupErrors] })
    .annotate(OpenApi.Summary, "Hash tiles and entry bundles (C2SP tlog-tiles)")
    .annotate(OpenApi.Description,
      "`tile/<L>/<N>[.p/<W>]`: the hashes of level L (height 8), N in the `x001/x234/067` form; " +
      "`tile/entries/<N>[.p/<W>]`: entries, each preceded by its 2-byte big-endian length. Full tiles never change " +
      "(`Cache-Control: public, max-age=31536000, immutable`); a partial tile `.p/<W>` is served while the published tree " +
      "has exactly that width there. A malformed path or a tile beyond the tree is 404. " + perAddress)

const inclusionEndpoint =
  HttpApiEndpoint.get("inclusion", "/log/proof/inclusion", {
    query: { index: Param("Leaf index"), tree_size: Param("Tree size of a published checkpoint") },
    success: InclusionProof,
    error: [InvalidProofRequest, ...groupErrors]
  })
    .annotate(OpenApi.Summary, "Inclusion proof of a leaf in a published tree")
    .annotate(OpenApi.Description, "Hashes are lowercase hex. A tree_size beyond the latest checkpoint or an index outside the tree is 400 validation-failed. " + perAddress)

const consistencyEndpoint =
  HttpApiEndpoint.get("consistency", "/log/proof/consistency", {
    query: { first: Param("The smaller tree size (0 allowed)"), second: Param("Tree size of a published checkpoint") },
    success: ConsistencyProof,
    error: [InvalidProofRequest, ...groupErrors]
  })
    .annotate(OpenApi.Summary, "Consistency proof between two published tree sizes")
    .annotate(OpenApi.Description,
      "Proves the tree of size `second` extends the tree of size `first`; first = 0 and first = second have the empty proof. " +
      "A size beyond the latest checkpoint, or first > second, is 400 validation-failed. " + perAddress)

export class LogApi extends HttpApiGroup.make("log")
  .add(checkpointEndpoint, keyEndpoint, policyEndpoint, tileEndpoint, inclusionEndpoint, consistencyEndpoint)
  .prefix("/api/v1")
  .annotate(OpenApi.Title, "Transparency log") {}

/**
 * The same endpoints at the root (`/log/checkpoint`, `/log/tile/…`), where C2SP tlog-tiles clients look for
 * a log: the same definitions and handlers (log/Http.ts), left out of the OpenAPI document, which names
 * them once, under /api/v1.
 */
export class RootLogApi extends HttpApiGroup.make("rootLog")
  .add(checkpointEndpoint, keyEndpoint, policyEndpoint, tileEndpoint, inclusionEndpoint, consistencyEndpoint)
  .annotate(OpenApi.Exclude, true) {}
