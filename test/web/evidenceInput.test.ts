import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { coseReceiptOf, tlogProofOf, transparentStatementOf, type StatementSigner } from "../../src/log/ReceiptFormats.js"
import { base64Bytes, base64Of, evidenceOfText, textOfFile } from "../../src/web/evidenceInput.js"
import { buildLog, bundleFor, logSigner, origin, receiptSigner } from "../log/logs.js"

/**
 * How the page reads what it is given (src/web/evidenceInput.ts, part of /web/verify.js): base64 as pasted
 * (wrapped, URL-safe, unpadded), each kind recognised by content, a saved file shown as the text that
 * verifies the same bytes again, and nothing a paste can hold makes it throw.
 */

const statementSigner: StatementSigner = { kid: receiptSigner.kid, sign: (input) => new Uint8Array(Buffer.from(receiptSigner.sign(input), "base64url")) }
const log = buildLog(20)
const bundle = bundleFor(log, 9)
const cose = coseReceiptOf(bundle, logSigner)
const files = {
  bundle: new TextEncoder().encode(JSON.stringify(bundle, null, 2)),
  "tlog-proof": new TextEncoder().encode(tlogProofOf(bundle)),
  "cose-receipt": cose,
  "transparent-statement": transparentStatementOf(log.receipts.get(9)!, cose, origin, statementSigner)
} as const

/** Base64 as people paste it: standard or URL-safe, padded or not, cut into lines. */
const pastedBase64 = (bytes: Uint8Array) =>
  fc.tuple(fc.boolean(), fc.boolean(), fc.integer({ min: 4, max: 80 }), fc.constantFrom("\n", "\r\n", " ")).map(([urlSafe, unpadded, width, newline]) => {
    let text = base64Of(bytes)
    if (urlSafe) text = text.replace(/\+/g, "-").replace(/\//g, "_")
    if (unpadded) text = text.replace(/=+$/, "")
    return text.replace(new RegExp(`(.{${width}})`, "g"), `$1${newline}`)
  })

describe("the page's reading of pasted and dropped evidence", () => {
  it("decodes any bytes from base64 however it was pasted", () => {
    fc.assert(fc.property(fc.uint8Array({ minLength: 1, maxLength: 300 }).chain((bytes) => fc.tuple(fc.constant(bytes), pastedBase64(bytes))), ([bytes, text]) => {
      expect(base64Bytes(text)).toEqual(bytes)
    }))
  })

  it("recognises each kind's file by content, and the text it shows for the file reads back as the same evidence", () => {
    for (const [kind, bytes] of Object.entries(files)) {
      const shown = textOfFile(bytes)
      const read = evidenceOfText(shown)
      expect(read, kind).toMatchObject({ ok: true, kind })
      if (read.ok && read.kind === "bundle") expect(read.bundle).toEqual(bundle)
      else if (read.ok) expect(typeof read.input === "string" ? new TextEncoder().encode(read.input) : read.input).toEqual(bytes)
    }
  })

  it("takes a COSE object's base64 in any pasted form", () => {
    for (const kind of ["cose-receipt", "transparent-statement"] as const) {
      fc.assert(fc.property(pastedBase64(files[kind]), (text) => {
        const read = evidenceOfText(text)
        expect(read).toMatchObject({ ok: true, kind })
        expect(read.ok && read.kind === kind && read.input).toEqual(files[kind])
      }))
    }
  })

  it("reads any JSON object as a bundle, and never throws on any text", () => {
    fc.assert(fc.property(fc.dictionary(fc.string(), fc.jsonValue()), fc.constantFrom(0, 2, "\t"), (value, indent) => {
      const read = evidenceOfText(JSON.stringify(value, null, indent))
      expect(read).toMatchObject({ ok: true, kind: "bundle" })
      expect(read.ok && read.kind === "bundle" && read.bundle).toEqual(JSON.parse(JSON.stringify(value)))
    }))
    fc.assert(fc.property(fc.string({ unit: "binary" }), (text) => {
      const read = evidenceOfText(text)
      if (read.ok && read.kind === "tlog-proof") expect(text.startsWith("c2sp.org/tlog-proof@v1\n")).toBe(true)
      if (read.ok && (read.kind === "cose-receipt" || read.kind === "transparent-statement")) expect(read.input).toBeInstanceOf(Uint8Array)
      if (!read.ok) expect(["Not JSON", "Not a receipt's proof"]).toContain(read.title)
    }))
  })

  it("shows a file that is not UTF-8 and not COSE as base64, and UTF-8 text as itself", () => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
      const shown = textOfFile(bytes)
      const text = Buffer.from(bytes).toString("utf8")
      if (Buffer.from(text, "utf8").equals(Buffer.from(bytes))) expect(shown).toBe(text)
      else expect(base64Bytes(shown)).toEqual(bytes)
    }))
  })
})
