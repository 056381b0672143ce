/**
 * The page's verifier (served as /web/verify.js): the relying party's checks of src/verify, the same
 * source the client module runs with node:crypto, here run with WebCrypto (`crypto.subtle`: SHA-256
 * and Ed25519). `npm run build` bundles this file and what it imports into one browser module with
 * esbuild (src/web/Bundle.ts); run from source, Web.ts bundles it when the server starts. Verdicts
 * are the client module's, and a chain report adds each event's own checks for the page's table.
 */
import { runAsync, type AsyncCrypto, type Verifying } from "../verify/Run.js"
import { checkEventChain, eventHashOf as eventHashRecipe, type ChainVerdict, type EventCheck, type VerifyOptions } from "../verify/Chain.js"
import { digestOf as digestRecipe } from "../verify/Jcs.js"
import { verifyReceiptBundle as checkReceiptBundle, type BundleVerdict, type BundleVerifyOptions } from "../verify/Bundle.js"
import { verifyEvidence as checkEvidence, type EvidenceVerdict, type EvidenceVerifyOptions } from "../verify/Evidence.js"

export { evidenceKindOf } from "../verify/Evidence.js"
export type { EvidenceKind, EvidenceStep, EvidenceStepResult, EvidenceVerdict, EvidenceVerifyOptions } from "../verify/Evidence.js"

export type { ChainFailureReason, ChainHead, ChainVerdict, EventCheck, VerifyOptions } from "../verify/Chain.js"
export type { BundleStep, BundleStepResult, BundleVerdict, BundleVerifyOptions, ReceiptKeys, WitnessPolicy } from "../verify/Bundle.js"
export { BundleSteps } from "../verify/Bundle.js"
export { canonicalJson } from "../verify/Jcs.js"

/** A chain's verdict with every event's own checks. */
export type ChainReport = ChainVerdict & { readonly events: ReadonlyArray<EventCheck> }

// Named through globalThis, so this file type-checks both with the DOM's types (src/web/tsconfig.json)
// and with Node's (the main tsconfig; the parity tests run it in Node).
type Subtle = NonNullable<typeof globalThis.crypto>["subtle"]
type PublicKey = Awaited<ReturnType<Subtle["importKey"]>>

/** WebCrypto takes views of a plain ArrayBuffer; every array here is one. */
const view = (bytes: Uint8Array) => bytes as Uint8Array<ArrayBuffer>

const subtle = (): Subtle => {
  const found = globalThis.crypto?.subtle
  if (found === undefined) throw new Error("WebCrypto is not available: open this page over HTTPS or from localhost")
  return found
}

/** True when this context can verify at all (browsers offer WebCrypto only in secure contexts). */
export const cryptoAvailable = (): boolean => globalThis.crypto?.subtle !== undefined

/** Raw keys imported once; null when WebCrypto refuses one. */
const importedKeys = new Map<string, Promise<PublicKey | null>>()

const keyOf = (raw: Uint8Array): Promise<PublicKey | null> => {
  const id = Array.from(raw, (b) => b.toString(16).padStart(2, "0")).join("")
  let key = importedKeys.get(id)
  if (key === undefined) {
    key = subtle().importKey("raw", view(raw), { name: "Ed25519" }, false, ["verify"]).catch(() => null)
    importedKeys.set(id, key)
  }
  return key
}

export const webCrypto: AsyncCrypto = {
  sha256: async (data) => new Uint8Array(await subtle().digest("SHA-256", view(data))),
  ed25519Key: async (raw) => raw.length === 32 && (await keyOf(raw)) !== null,
  ed25519Verify: async (raw, message, signature) => {
    const key = await keyOf(raw)
    if (key === null || signature.length !== 64) return false
    try {
      return await subtle().verify({ name: "Ed25519" }, key, view(signature), view(message))
    } catch {
      return false
    }
  }
}

const run = <A>(program: Verifying<A>): Promise<A> => runAsync(program, webCrypto)

/** SHA-256 hex of the JCS form. */
export const digestOf = (value: unknown): Promise<string> => run(digestRecipe(value))

/** eventHash: SHA-256 hex of "pv-event-v1\n" + JCS(event without eventHash and signature). */
export const eventHashOf = (event: Readonly<Record<string, unknown>>): Promise<string> => run(eventHashRecipe(event))

/**
 * Checks a chain as the client module's `verifyEventChain` does, with the same verdict (the first
 * failing sequence and its reason), plus each event's own checks for display: its hash recomputed,
 * its link to the event before it in the list, and its signature by a JWKS key.
 */
export const verifyEventChain = async (events: ReadonlyArray<unknown>, jwks: unknown, options: VerifyOptions = {}): Promise<ChainReport> => {
  const { verdict, events: checks } = await run(checkEventChain(events, jwks, options, true))
  return { ...verdict, events: checks }
}

/**
 * Checks a receipt proof bundle step by step, as the client module's `verifyReceiptBundle` does:
 * digest → entry → leaf → inclusion → checkpoint_signature → [witness_cosignatures] → receipt_signature.
 */
export const verifyReceiptBundle = (bundle: unknown, options: BundleVerifyOptions = {}): Promise<BundleVerdict> =>
  run(checkReceiptBundle(bundle, options))

/**
 * Checks a bundle, a tlog-proof, a COSE Receipt or a Transparent Statement (recognised by content), as the
 * client module's `verifyEvidence` does, with WebCrypto.
 */
export const verifyEvidence = (input: unknown, options: EvidenceVerifyOptions = {}): Promise<EvidenceVerdict> =>
  run(checkEvidence(input, options))
