import { evidenceKindOf, type EvidenceKind } from "../verify/Evidence.js"

/**
 * What the page makes of a pasted text or a saved file before it verifies it: the evidence kind,
 * recognised by content as `pv verify-receipt` does (src/verify/Evidence.ts), with binary evidence
 * (the COSE kinds) pasted as base64. Pure, and part of /web/verify.js, so Node tests it as the page runs it.
 */

/** What was given: a bundle's parsed JSON, a tlog-proof's text, or a COSE object's bytes; else why it is none of them. */
export type PastedEvidence =
  | { readonly ok: true; readonly kind: "bundle"; readonly bundle: unknown }
  | { readonly ok: true; readonly kind: Exclude<EvidenceKind, "bundle">; readonly input: string | Uint8Array }
  | { readonly ok: false; readonly title: string; readonly detail: string }

const NotEvidence = "It is neither a proof bundle (JSON), a tlog-proof, a COSE Receipt nor a Transparent Statement."

const Base64Text = /^[A-Za-z0-9+/_-]+={0,2}$/

/** Standard or URL-safe base64, whitespace ignored; undefined when it is not base64. */
export const base64Bytes = (text: string): Uint8Array | undefined => {
  const compact = text.replace(/\s+/g, "")
  if (compact.length === 0 || !Base64Text.test(compact)) return undefined
  try {
    return Uint8Array.from(atob(compact.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0))
  } catch {
    return undefined
  }
}

export const base64Of = (bytes: Uint8Array): string => {
  let binary = ""
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000))
  return btoa(binary)
}

/** The evidence in pasted text, recognised by content as `pv verify-receipt` does. */
export const evidenceOfText = (text: string): PastedEvidence => {
  if (text.trimStart().startsWith("{")) {
    try {
      return { ok: true, kind: "bundle", bundle: JSON.parse(text) }
    } catch (error) {
      return { ok: false, title: "Not JSON", detail: `The pasted bundle does not parse: ${error instanceof Error ? error.message : String(error)}` }
    }
  }
  const kind = evidenceKindOf(text)
  if (kind === "tlog-proof") return { ok: true, kind, input: text }
  const bytes = base64Bytes(text)
  const binaryKind = bytes === undefined ? undefined : evidenceKindOf(bytes)
  if (bytes !== undefined && binaryKind !== undefined && binaryKind !== "bundle") return { ok: true, kind: binaryKind, input: bytes }
  return { ok: false, title: "Not a receipt's proof", detail: `${NotEvidence} ${bytes === undefined ? "Binary evidence is pasted as base64." : "The base64 decodes to none of them."}` }
}

const decoder = new TextDecoder("utf-8", { fatal: true })

/** A saved file's text as it will be pasted: itself when it is UTF-8 text, its base64 when it is binary (a COSE object). */
export const textOfFile = (bytes: Uint8Array): string => {
  const kind = evidenceKindOf(bytes)
  if (kind === "cose-receipt" || kind === "transparent-statement") return base64Of(bytes)
  try {
    return decoder.decode(bytes)
  } catch {
    return base64Of(bytes)
  }
}

