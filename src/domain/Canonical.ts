import { hash } from "node:crypto"
import { canonicalJson } from "../verify/Jcs.js"

/**
 * The one digest recipe of docs/API.md §2: RFC 8785 (JCS) canonical JSON, SHA-256, lowercase hex.
 * The JCS is src/verify/Jcs.ts's, which the page bundles too; the hashing here is node:crypto's.
 */
export { canonicalJson }

// One-shot `hash` (Node ≥ 21.7) spares the Hash object `createHash` allocates per call: API keys are hashed per request.
export const sha256Hex = (input: string | Uint8Array): string => hash("sha256", input, "hex")

export const digestOf = (value: unknown): string => sha256Hex(canonicalJson(value))

export const DigestPattern = /^[0-9a-f]{64}$/u
