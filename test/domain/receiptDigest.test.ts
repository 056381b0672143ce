import canonicalize from "canonicalize"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { ReceiptSnapshot, receiptDigestOf, sealedSnapshotText, sealReceipt, Verdict } from "../../src/domain/Receipt.js"
import { sha256Hex } from "../../src/domain/Canonical.js"

// Text a receipt can hold: anything without a lone surrogate (requests are decoded as NonEmptyText, the rest
// is the service's own), including quotes, backslashes, controls, non-BMP characters and key-like text.
const text = fc.oneof(
  fc.string({ unit: "grapheme", maxLength: 40 }),
  fc.string({ unit: "binary", maxLength: 40 }).filter((s) => (s as unknown as { isWellFormed(): boolean }).isWellFormed()),
  fc.constantFrom("", "\"", "\\", "\u0001\u001f\u007f", "\u2028\u2029", "😀", "é", "schema", "__proto__")
)
const verdict = fc.record(Object.fromEntries(Object.keys(Verdict.fields).map((key) => [key, text])))
// Every member of the schema, each with the kind of value the service puts there.
const snapshot = fc.record(Object.fromEntries(Object.keys(ReceiptSnapshot.fields).map((key) => [
  key,
  key === "verdicts" ? fc.array(verdict, { maxLength: 8 }) : key === "claim_scope" ? fc.array(text, { maxLength: 8 }) : text
]))) as unknown as fc.Arbitrary<typeof ReceiptSnapshot.Type>

describe("the digest of a receipt the service seals", () => {
  it("is over the JCS text of its snapshot (canonicalize's), written natively", () => {
    fc.assert(fc.property(snapshot, (s) => {
      expect(sealedSnapshotText(s)).toBe(canonicalize(s))
      expect(sealReceipt(s).receipt_digest).toBe(receiptDigestOf(s))
      expect(sealReceipt(s).receipt_digest).toBe(sha256Hex(canonicalize(s)!))
    }), { numRuns: 500 })
  })
})
