import { Schema } from "effect"

/** How a webhook subscription's deliveries are signed: `v1` (HMAC, a secret per subscription) or `v1a` (Ed25519, the service's key). */
export const SignatureScheme = Schema.Literals(["v1", "v1a"])
export type SignatureScheme = typeof SignatureScheme.Type
