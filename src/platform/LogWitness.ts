import { verifySync } from "../verify/NodeCrypto.js"
import { parseCosignerKey } from "../verify/Note.js"

/**
 * A witness as PV_LOG_WITNESSES and `pv log monitor --witness` name it, apart from the rest of the settings
 * (platform/Config.ts): the CLI parses it without loading Effect's Config and Schema modules.
 */

/** One configured witness: where to POST add-checkpoint, and its cosignature/v1 verifier key. */
export interface LogWitnessSetting {
  readonly url: string
  readonly verifierKey: string
}

export const isHttpUrl = (entry: string): boolean => {
  try {
    const url = new URL(entry)
    return url.protocol === "https:" || url.protocol === "http:"
  } catch {
    return false
  }
}

/** `<URL prefix>=<vkey>`: split at the first `=` (a vkey's base64 may end in `=`; a submission prefix has no query). */
export const parseLogWitness = (entry: string): LogWitnessSetting | undefined => {
  const at = entry.indexOf("=")
  if (at <= 0) return undefined
  const url = entry.slice(0, at).replace(/\/+$/, "")
  const verifierKey = entry.slice(at + 1)
  return isHttpUrl(url) && verifySync(parseCosignerKey(verifierKey)).ok ? { url, verifierKey } : undefined
}
