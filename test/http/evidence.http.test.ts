import { createPublicKey } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { CoMETRE } from "@transmute/rfc9162"
import { decode, Tag } from "cbor2"
import { coseVerify, Sign1 } from "cose-kit"
import { Effect, Exit } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { verifyReceiptCommand } from "../../src/cli/VerifyReceipt.js"
import { canonicalJson } from "../../src/domain/Canonical.js"
import { privateKeyFromSeed } from "../../src/events/Signer.js"
import { entryBytesOf, receiptEntryOf } from "../../src/log/Entries.js"
import { LogIntegrator } from "../../src/log/Integrator.js"
import { testLogSigningSeed } from "../../src/log/LogKey.js"
import { noteKeyId, verifierKeyOfSigner } from "../../src/log/Note.js"
import { verifyEvidence, type EvidenceVerifyOptions } from "../../src/verify/Evidence.js"
import { verifySync } from "../../src/verify/NodeCrypto.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, expectProblem, putDetermination, request } from "../support/http.js"
import { goAvailable, goTlogProofRunner } from "../support/goTlogProof.js"
import { startTestServer, type TestServer } from "../support/server.js"

/**
 * docs/API.md "Evidence in standard encodings" over HTTP: each receipt's proof as a C2SP tlog-proof, an
 * RFC 9942 COSE Receipt and an RFC 9943 Transparent Statement, checked by our verifiers and by COSE
 * code that is not ours (cose-kit for the signatures and headers, @transmute/rfc9162 for the path).
 */

const kind = process.env.PV_TEST_DB ?? "pglite"
const origin = "localhost/pv-log"
const logKey = privateKeyFromSeed(testLogSigningSeed)
const pinnedVerifierKey = verifierKeyOfSigner(origin, logKey)
const rawLogKey = new Uint8Array(Buffer.from(createPublicKey(logKey).export({ format: "jwk" }).x!, "base64url"))
const formats = [
  ["tlog-proof", "text/plain; charset=utf-8"],
  ["cose-receipt", "application/scitt-receipt+cose"],
  ["transparent-statement", "application/scitt-statement+cose"]
] as const

let server: TestServer
let writer: string
let reader: string
let otherTenant: string
let jwks: any
const subject = "DET-V1-EVIDENCE-0001"

const receiptBody = (n: number) => ({
  tenant_id: "tenant-a",
  organization: "Evidence Buyers",
  principal: `agent-${n}`,
  subject_public_id: subject,
  purpose_id: "supplier-onboarding",
  requested_action: "screen",
  claim_scope: ["identity"]
})

const evidenceOf = async (on: TestServer, receiptId: string, format: string, bearer = reader) => {
  const response = await fetch(`${on.baseUrl}/api/v1/reliance-receipts/${receiptId}/${format}`, { headers: { authorization: `Bearer ${bearer}` } })
  const bytes = new Uint8Array(await response.arrayBuffer())
  return { status: response.status, headers: response.headers, bytes, text: Buffer.from(bytes).toString("utf8") }
}

/** Waits (the integrator covers an entry within 2 s) until the receipt's evidence is served. */
const servedEvidence = async (receiptId: string, format: string) => {
  const deadline = Date.now() + 5_000
  for (;;) {
    const reply = await evidenceOf(server, receiptId, format)
    if (reply.status !== 404 || Date.now() > deadline) return reply
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

const createReceipt = async (n: number, on = server, bearer = writer) => {
  const reply = await request(on, "POST", "/api/v1/reliance-receipts", { bearer, body: receiptBody(n) })
  expect(reply.status, reply.text).toBe(201)
  return reply.body
}

const pinned = (): EvidenceVerifyOptions => ({ verifierKey: pinnedVerifierKey, receiptKeys: jwks })

/** The receipt-signing key of a kid as a Node key (cose-kit verifies with it). */
const receiptKeyOf = (kid: string) => createPublicKey({ key: jwks.keys.find((k: any) => k.kid === kid), format: "jwk" })

beforeAll(async () => {
  server = await startTestServer({ config: { logRateLimitPerMinute: 1_000_000 } })
  writer = (await createKey(server, ["receipt:write", "receipt:read"], { rate_limit_per_minute: 1_000_000 })).api_key
  reader = (await createKey(server, ["receipt:read", "mcp:call"], { rate_limit_per_minute: 1_000_000 })).api_key
  otherTenant = (await createKey(server, ["receipt:read", "mcp:call"], { tenant_id: "tenant-b" })).api_key
  expect((await putDetermination(server, subject, determinationBody(Date.now() - DAY_MS))).status).toBe(201)
  jwks = (await request(server, "GET", "/api/v1/events/keys")).body
})

afterAll(() => server?.close())

describe(`evidence in standard encodings (${kind})`, () => {
  it("serves all three with their media types, each verifying with pinned keys and stating the same facts as the bundle", async () => {
    const receipts = await Promise.all([1, 2, 3, 4, 5].map((n) => createReceipt(n)))
    const receipt = receipts[3]
    const tlog = await servedEvidence(receipt.receipt_id, "tlog-proof")
    expect(tlog.status, tlog.text).toBe(200)
    const bundle = (await request(server, "GET", `/api/v1/reliance-receipts/${receipt.receipt_id}/proof`, { bearer: reader })).body
    for (const [format, mediaType] of formats) {
      const reply = await evidenceOf(server, receipt.receipt_id, format)
      expect(reply.status, reply.text).toBe(200)
      expect(reply.headers.get("content-type")).toBe(mediaType)
      const verdict = verifySync(verifyEvidence(format === "tlog-proof" ? reply.text : reply.bytes, { ...pinned(), receipt }))
      expect(verdict, format).toMatchObject({ kind: format, ok: true, not_checked: [] })
    }
    // The tlog-proof is the bundle's facts: the entry in extra, the index, the path in base64, the checkpoint (unless it moved since).
    const text = (await evidenceOf(server, receipt.receipt_id, "tlog-proof")).text
    const [header, extra, index, ...rest] = text.split("\n")
    expect(header).toBe("c2sp.org/tlog-proof@v1")
    expect(extra).toBe(`extra ${Buffer.from(entryBytesOf(receiptEntryOf(receipt))).toString("base64")}`)
    expect(index).toBe(`index ${bundle.leaf_index}`)
    const blank = rest.indexOf("")
    const checkpoint = rest.slice(blank + 1).join("\n")
    if (checkpoint === bundle.checkpoint) expect(rest.slice(0, blank)).toEqual(bundle.inclusion_path.map((h: string) => Buffer.from(h, "hex").toString("base64")))
    expect(checkpoint.startsWith(`${origin}\n`)).toBe(true)
  })

  it.skipIf(!goAvailable)("the served tlog-proof verifies with Go's sumdb/note and sumdb/tlog (test/log/go/tlogproof.go)", { timeout: 300_000 }, async () => {
    const receipt = await createReceipt(71)
    const reply = await servedEvidence(receipt.receipt_id, "tlog-proof")
    expect(reply.status, reply.text).toBe(200)
    const go = goTlogProofRunner()
    try {
      const run = await go.run(pinnedVerifierKey, reply.bytes)
      expect(run.status, run.stderr + run.stdout).toBe(0)
      expect(run.stdout).toMatch(/^ok \d+ \d+\n$/)
      const edited = await go.run(pinnedVerifierKey, reply.text.replace(/\nindex (\d+)\n/, (_, i) => `\nindex ${Number(i) + 1}\n`))
      expect(edited.status, edited.stdout).toBe(1)
    } finally {
      go.close()
    }
  })

  it("the COSE Receipt checks out with cose-kit (signature over the Sig_structure, headers) and @transmute/rfc9162 (the path to the root)", async () => {
    const receipt = await createReceipt(11)
    const reply = await servedEvidence(receipt.receipt_id, "cose-receipt")
    expect(reply.status, reply.text).toBe(200)
    const tagged = decode(reply.bytes, { preferMap: true }) as Tag
    expect(Number(tagged.tag)).toBe(18)
    const [protectedBytes, unprotected, payload, signature] = tagged.contents as [Uint8Array, Map<number, any>, null, Uint8Array]
    expect(payload).toBeNull()
    const [treeSize, leafIndex, path] = decode(unprotected.get(396).get(-1)[0]) as [number, number, Array<Uint8Array>]
    // Their inclusion check: the root the path leads to from SHA-256(0x00 ‖ entry).
    const leaf = await CoMETRE.RFC9162_SHA256.leaf(entryBytesOf(receiptEntryOf(receipt)))
    const root = await CoMETRE.RFC9162_SHA256.verify_inclusion_proof(leaf, { log_id: "", tree_size: treeSize, leaf_index: leafIndex, inclusion_path: path })
    // Their signature check, with the root as the detached payload.
    const sign1 = new Sign1(protectedBytes, unprotected, root, signature)
    expect(sign1.protectedHeaders).toEqual(new Map<number, unknown>([[1, -8], [4, new Uint8Array(noteKeyId(origin, rawLogKey))], [395, 1]]))
    expect(sign1.algName).toBe("EdDSA")
    await expect(sign1.verify(createPublicKey(logKey))).resolves.toBe(true)
    // The same size and root as a checkpoint the log signed.
    const tlog = (await evidenceOf(server, receipt.receipt_id, "tlog-proof")).text
    const note = tlog.slice(tlog.indexOf("\n\n") + 2).split("\n")
    if (Number(note[1]) === treeSize) expect(Buffer.from(root).toString("base64")).toBe(note[2])
    // A wrong root (another entry's) does not verify with their code either.
    const otherLeaf = await CoMETRE.RFC9162_SHA256.leaf(Buffer.from("not this entry"))
    const otherRoot = await CoMETRE.RFC9162_SHA256.verify_inclusion_proof(otherLeaf, { log_id: "", tree_size: treeSize, leaf_index: leafIndex, inclusion_path: path })
    await expect(new Sign1(protectedBytes, unprotected, otherRoot, signature).verify(createPublicKey(logKey))).resolves.toBe(false)
  })

  it("the Transparent Statement checks out with cose-kit: its signature, headers and CWT claims, the payload the receipt as GET serves it, and its embedded receipt", async () => {
    const receipt = await createReceipt(21)
    const reply = await servedEvidence(receipt.receipt_id, "transparent-statement")
    expect(reply.status, reply.text).toBe(200)
    const { isValid, decoded } = await coseVerify(reply.bytes, receiptKeyOf(receipt.signature.kid))
    expect(isValid).toBe(true)
    const header = decoded.protectedHeaders
    expect(header.get(1)).toBe(-8)
    expect(header.get(3)).toBe("application/json")
    expect(Buffer.from(header.get(4) as Uint8Array).toString("utf8")).toBe(receipt.signature.kid)
    expect(header.get(15)).toEqual(new Map<number, unknown>([[1, origin], [2, receipt.receipt_id], [6, Math.floor(Date.parse(receipt.created_at) / 1000)]]))
    const served = (await request(server, "GET", `/api/v1/reliance-receipts/${receipt.receipt_id}`, { bearer: reader })).text
    expect(Buffer.from(decoded.payload).toString("utf8")).toBe(canonicalJson(JSON.parse(served)))
    const receipts = decoded.unprotectedHeaders.get(394) as Array<Uint8Array>
    expect(receipts).toHaveLength(1)
    expect(Buffer.from(receipts[0]!)).toEqual(Buffer.from((await evidenceOf(server, receipt.receipt_id, "cose-receipt")).bytes))
    // Another key does not verify it.
    const { isValid: withLogKey } = await coseVerify(reply.bytes, createPublicKey(logKey))
    expect(withLogKey).toBe(false)
  })

  it("applies GET receipt's rules: another tenant's receipt and an unknown id are 404 receipt-not-found, receipt:read is required", async () => {
    const receipt = await createReceipt(31)
    const noRead = (await createKey(server, ["receipt:write"])).api_key
    for (const [format] of formats) {
      const theirs = await evidenceOf(server, receipt.receipt_id, format, otherTenant)
      expectProblem({ ...theirs, body: JSON.parse(theirs.text) }, 404, "receipt-not-found")
      const unknown = await evidenceOf(server, "rr_01ARZ3NDEKTSV4RRFFQ69G5FAV", format)
      expectProblem({ ...unknown, body: JSON.parse(unknown.text) }, 404, "receipt-not-found")
      const scope = await evidenceOf(server, receipt.receipt_id, format, noRead)
      expectProblem({ ...scope, body: JSON.parse(scope.text) }, 403, "insufficient-scope")
      const nul = await evidenceOf(server, "rr_%00", format)
      expect(nul.status, nul.text).toBeLessThan(500)
    }
  })

  it("/openapi.json lists the three with their media types", async () => {
    const spec = (await request(server, "GET", "/openapi.json")).body
    for (const [format, mediaType] of formats) {
      const operation = spec.paths[`/api/v1/reliance-receipts/{receiptId}/${format}`]?.get
      expect(operation, format).toBeDefined()
      expect(Object.keys(operation.responses["200"].content)).toEqual([mediaType])
    }
  })

  it("MCP get_reliance_receipt takes format: each kind (binary as base64 with its media type); no format keeps today's answer", async () => {
    const receipt = await createReceipt(41)
    await servedEvidence(receipt.receipt_id, "tlog-proof")
    const client = new Client({ name: "pv-evidence-test", version: "1.0.0" })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.baseUrl}/api/v1/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${reader}` } }
    }))
    try {
      const { tools } = await client.listTools()
      const tool = tools.find((t) => t.name === "get_reliance_receipt")!
      expect((tool.inputSchema.properties as any).format.enum).toEqual(["bundle", "tlog-proof", "cose-receipt", "transparent-statement"])
      const plain = await client.callTool({ name: "get_reliance_receipt", arguments: { receipt_id: receipt.receipt_id } })
      expect((plain.structuredContent as any).receipt_id).toBe(receipt.receipt_id)
      expect((plain.structuredContent as any).signature).toEqual(receipt.signature)
      const bundle = await client.callTool({ name: "get_reliance_receipt", arguments: { receipt_id: receipt.receipt_id, format: "bundle" } })
      expect(Object.keys(bundle.structuredContent as any)).toContain("inclusion_path")
      for (const [format, mediaType] of formats) {
        const answer = await client.callTool({ name: "get_reliance_receipt", arguments: { receipt_id: receipt.receipt_id, format } })
        const content = answer.structuredContent as any
        expect(content).toMatchObject({ receipt_id: receipt.receipt_id, format, media_type: mediaType })
        const bytes = format === "tlog-proof" ? content.text : new Uint8Array(Buffer.from(content.base64, "base64"))
        expect(verifySync(verifyEvidence(bytes, { ...pinned(), receipt })).ok, format).toBe(true)
      }
      const theirs = new Client({ name: "pv-evidence-test-b", version: "1.0.0" })
      await theirs.connect(new StreamableHTTPClientTransport(new URL(`${server.baseUrl}/api/v1/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${otherTenant}` } }
      }))
      await expect(theirs.callTool({ name: "get_reliance_receipt", arguments: { receipt_id: receipt.receipt_id, format: "cose-receipt" } }))
        .rejects.toMatchObject({ code: -32000, data: { code: "receipt-not-found" } })
      await theirs.close()
    } finally {
      await client.close()
    }
  })
})

describe(`pv verify-receipt reads each kind of evidence (${kind})`, () => {
  it("recognises each saved file by content, passes it with pinned keys, and names the failing step of a tampered copy", async () => {
    const receipt = await createReceipt(61)
    await servedEvidence(receipt.receipt_id, "tlog-proof")
    const dir = mkdtempSync(join(tmpdir(), "pv-evidence-cli-"))
    try {
      const keys = join(dir, "jwks.json")
      const saved = join(dir, "receipt.json")
      writeFileSync(keys, JSON.stringify(jwks))
      writeFileSync(saved, JSON.stringify(receipt))
      for (const [format] of formats) {
        const file = join(dir, `evidence.${format}`)
        const bytes = (await evidenceOf(server, receipt.receipt_id, format)).bytes
        writeFileSync(file, bytes)
        const options = { file, verifierKey: pinnedVerifierKey, jwks: keys, receipt: saved }
        const verdict = await Effect.runPromise(verifyReceiptCommand(options))
        expect(verdict, format).toMatchObject({ kind: format, ok: true })
        const tampered = new Uint8Array(bytes)
        tampered[tampered.length - 2] = tampered[tampered.length - 2]! ^ 1
        writeFileSync(file, tampered)
        const refused = await Effect.runPromiseExit(verifyReceiptCommand(options))
        expect(Exit.isFailure(refused) && String(refused.cause), format).toMatch(/FAILED at step (inclusion|checkpoint_signature|log_signature|statement_signature|format)/)
        // Without pinned keys nothing is vouched for: not verified, and says so.
        writeFileSync(file, bytes)
        const unpinned = await Effect.runPromiseExit(verifyReceiptCommand({ file, receipt: saved }))
        expect(Exit.isFailure(unpinned) && String(unpinned.cause), format).toMatch(/NOT VERIFIED/)
      }
      const bare = join(dir, "evidence.cose-receipt")
      const noReceipt = await Effect.runPromiseExit(verifyReceiptCommand({ file: bare, verifierKey: pinnedVerifierKey, jwks: keys }))
      expect(Exit.isFailure(noReceipt) && String(noReceipt.cause)).toMatch(/FAILED at step entry/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe(`evidence before integration (${kind})`, () => {
  let paused: TestServer
  let pausedWriter: string
  beforeAll(async () => {
    paused = await startTestServer({ config: { logIntegrationIntervalMs: 0 } })
    pausedWriter = (await createKey(paused, ["receipt:write", "receipt:read"])).api_key
    expect((await putDetermination(paused, subject, determinationBody(Date.now() - DAY_MS))).status).toBe(201)
  })
  afterAll(() => paused?.close())

  it("answers 404 not-yet-logged with Retry-After: 1 for each format until the entry is under a checkpoint, then serves it", async () => {
    const receipt = await createReceipt(51, paused, pausedWriter)
    for (const [format] of formats) {
      const early = await evidenceOf(paused, receipt.receipt_id, format, pausedWriter)
      expectProblem({ ...early, body: JSON.parse(early.text) }, 404, "not-yet-logged")
      expect(early.headers.get("retry-after")).toBe("1")
    }
    await paused.run(Effect.flatMap(LogIntegrator, (integrator) => integrator.integrateOnce))
    for (const [format, mediaType] of formats) {
      const later = await evidenceOf(paused, receipt.receipt_id, format, pausedWriter)
      expect(later.status, later.text).toBe(200)
      expect(later.headers.get("content-type")).toBe(mediaType)
    }
  })
})
