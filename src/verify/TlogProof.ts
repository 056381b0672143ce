import { decodeStdBase64, utf8Decode } from "./Bytes.js"
import { accept, refuse, type Checked } from "./Checked.js"

/**
 * C2SP tlog-proof@v1 (https://c2sp.org/tlog-proof), read strictly: the header line, an optional
 * `extra <base64>`, `index <decimal>`, zero or more base64 SHA-256 hashes (the inclusion path, leaf's
 * sibling first), an empty line, then the checkpoint note verbatim. Base64 is standard and padded,
 * canonical only; the index has no leading zero. Nothing is verified here.
 */

export const TlogProofHeader = "c2sp.org/tlog-proof@v1"
export const TlogProofMediaType = "text/plain; charset=utf-8"

export interface TlogProof {
  readonly extra: Uint8Array | undefined
  readonly index: number
  readonly path: ReadonlyArray<Uint8Array>
  /** The checkpoint note, verbatim. */
  readonly checkpoint: string
}

const IndexPattern = /^index (0|[1-9][0-9]*)$/

export const parseTlogProof = (input: unknown): Checked<TlogProof> => {
  const text = typeof input === "string" ? input : input instanceof Uint8Array ? utf8Decode(input) : undefined
  if (text === undefined) return refuse(input instanceof Uint8Array ? "the proof is not UTF-8" : "the proof is not text")
  const blank = text.indexOf("\n\n")
  if (blank < 0) return refuse("there is no empty line before the checkpoint")
  const lines = text.slice(0, blank).split("\n")
  const checkpoint = text.slice(blank + 2)
  if (lines[0] !== TlogProofHeader) return refuse(`the first line is not ${TlogProofHeader}`)
  let at = 1
  let extra: Uint8Array | undefined
  if (lines[at]?.startsWith("extra ")) {
    extra = decodeStdBase64(lines[at]!.slice("extra ".length))
    if (extra === undefined) return refuse(`line ${at + 1}: extra is not canonical padded standard base64`)
    at++
  }
  const index = IndexPattern.exec(lines[at] ?? "")
  if (index === null || !Number.isSafeInteger(Number(index[1]))) return refuse(`line ${at + 1} is not "index <decimal without leading zeroes>"`)
  at++
  const path: Array<Uint8Array> = []
  for (; at < lines.length; at++) {
    const hash = decodeStdBase64(lines[at]!)
    if (hash === undefined || hash.length !== 32) return refuse(`line ${at + 1} is not the canonical base64 of a 32-byte hash`)
    path.push(hash)
  }
  if (checkpoint.length === 0) return refuse("the checkpoint is missing after the empty line")
  return accept({ extra, index: Number(index[1]), path, checkpoint })
}
