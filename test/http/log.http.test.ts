import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { Effect, Exit } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { eventEntrySql, receiptEntrySql } from "../../migrations/0005_transparency_log.js"
import { logMonitorCommand } from "../../src/cli/LogMonitor.js"
import { verifyReceiptCommand } from "../../src/cli/VerifyReceipt.js"
import { keysFromJwks, verifyCheckpointConsistency, verifyReceiptBundle } from "../../src/client/index.js"
import { canonicalJson } from "../../src/domain/Canonical.js"
import { privateKeyFromSeed } from "../../src/events/Signer.js"
import { openCheckpoint, signCheckpoint } from "../../src/log/Checkpoint.js"
import { entryBytesOf, eventEntryOf, parseEntryBytes, receiptEntryOf, verifyReceiptSignature } from "../../src/log/Entries.js"
import { LogIntegrator, type LogIntegratorShape } from "../../src/log/Integrator.js"
import { testLogSigningSeed } from "../../src/log/LogKey.js"
import { hexOf, leafHash, rootOf, subtreeHashesOf, verifyInclusionProof } from "../../src/log/Merkle.js"
import { noteSignerFromPrivateKey, verifierKeyOfSigner } from "../../src/log/Note.js"
import { decodeEntryBundle, entryBundlePath, entryBundlesOf, rootFromTiles, tileHashes, tilePath, tilesOf } from "../../src/log/Tiles.js"
import { Receipts } from "../../src/receipts/Receipts.js"
import { childEnvironment } from "../support/childEnv.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, expectProblem, putDetermination, request } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"
import { compiledEntry, runEntry } from "../support/spawned.js"

/**
 * docs/API.md §11 over HTTP, on each database: signed receipts, one append-only Merkle log of
 * every receipt and event, C2SP checkpoints, tiles and proofs, proof bundles that verify offline, the
 * monitor, two instances on one database, and tampering with stored rows being detected.
 */

const kind = process.env.PV_TEST_DB ?? "pglite"
const root = fileURLToPath(new URL("../..", import.meta.url))
const origin = "localhost/pv-log"
const logKey = privateKeyFromSeed(testLogSigningSeed)
const pinnedVerifierKey = verifierKeyOfSigner(origin, logKey)
const logSigner = noteSignerFromPrivateKey(origin, logKey)
const subjects = ["DET-V1-LOG-0001", "DET-V1-LOG-0002"]
const logConfig = { logRateLimitPerMinute: 1_000_000 }

let server: TestServer
let writer: string
let reader: string
let otherTenant: string
let asOf: number
let jwks: any
let revision = 0
let principal = 0
const receipts = new Map<string, any>()
const scratch = mkdtempSync(join(tmpdir(), "pv-log-test-"))

const receiptBody = (subject: string) => ({
  tenant_id: "tenant-a",
  organization: "Log Buyers",
  principal: `agent-${principal++}`,
  subject_public_id: subject,
  purpose_id: "supplier-onboarding",
  requested_action: "screen",
  claim_scope: ["identity"]
})

const createReceipt = async (on: TestServer = server, subject = subjects[principal % subjects.length]!) => {
  const reply = await request(on, "POST", "/api/v1/reliance-receipts", { bearer: writer, body: receiptBody(subject) })
  expect(reply.status, reply.text).toBe(201)
  receipts.set(reply.body.receipt_id, reply.body)
  return reply.body
}

/** Up to `concurrency` creates at a time. */
const createReceipts = async (count: number, on: TestServer = server, concurrency = 16) => {
  const created: Array<any> = []
  let left = count
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, async () => {
    while (left-- > 0) created.push(await createReceipt(on))
  }))
  return created
}

/** A changed body, so the determination gets a new version and one event. */
const updateDetermination = async (subject: string, on: TestServer = server) => {
  const reply = await putDetermination(on, subject, determinationBody(asOf, { why_this_tier: [`revision ${++revision}`] }))
  expect([200, 201], reply.text).toContain(reply.status)
}

interface Seen {
  readonly note: string
  readonly size: number
  readonly root: string
}

const checkpointOf = async (on: TestServer = server, path = "/api/v1/log/checkpoint"): Promise<Seen> => {
  const reply = await request(on, "GET", path)
  expect(reply.status, reply.text).toBe(200)
  const opened = openCheckpoint(reply.text, pinnedVerifierKey)
  if (!opened.ok) throw new Error(opened.detail)
  return { note: reply.text, size: opened.value.size, root: hexOf(opened.value.root) }
}

/** Polls until a checkpoint covers `size` entries; fails after `withinMs`. */
const checkpointCovering = async (size: number, on: TestServer = server, withinMs = 5_000): Promise<Seen> => {
  const deadline = Date.now() + withinMs
  for (;;) {
    const seen = await checkpointOf(on)
    if (seen.size >= size) return seen
    if (Date.now() > deadline) throw new Error(`no checkpoint covers ${size} entries within ${withinMs} ms (latest ${seen.size})`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

const bytesAt = async (path: string, on: TestServer = server) => {
  const response = await fetch(on.baseUrl + path)
  return { status: response.status, headers: response.headers, bytes: new Uint8Array(await response.arrayBuffer()) }
}

/** Every entry of the tree of `size`, read from the entry bundles the log serves. */
const servedEntries = async (size: number, on: TestServer = server): Promise<Array<Uint8Array>> => {
  const entries: Array<Uint8Array> = []
  for (const bundle of entryBundlesOf(size)) {
    const reply = await bytesAt(`/log/${entryBundlePath(bundle)}`, on)
    expect(reply.status, entryBundlePath(bundle)).toBe(200)
    const decoded = decodeEntryBundle(reply.bytes, bundle.width)
    if (!decoded.ok) throw new Error(decoded.detail)
    entries.push(...decoded.value)
  }
  return entries
}

/** Every hash tile of the tree of `size`, as the log serves them. */
const servedTiles = async (size: number, on: TestServer = server): Promise<Map<string, Uint8Array>> => {
  const tiles = new Map<string, Uint8Array>()
  for (const tile of tilesOf(size)) {
    const reply = await bytesAt(`/api/v1/log/${tilePath(tile)}`, on)
    expect(reply.status, tilePath(tile)).toBe(200)
    tiles.set(tilePath(tile), reply.bytes)
  }
  return tiles
}

/** Every event of the test's determinations, from the signed feed. */
const allEvents = async (on: TestServer = server) => {
  const events: Array<any> = []
  for (const subject of subjects) {
    const page = await request(on, "GET", `/api/v1/events?public_id=${subject}&limit=1000`, { bearer: reader })
    expect(page.status, page.text).toBe(200)
    events.push(...page.body.events)
  }
  return events
}

/** The entries the log must hold: one per receipt and one per event, as JCS text. */
const expectedEntries = async (on: TestServer = server) =>
  [
    ...[...receipts.values()].map((receipt) => canonicalJson(receiptEntryOf(receipt))),
    ...(await allEvents(on)).map((event) => canonicalJson(eventEntryOf(event)))
  ].sort()

const sql = <A>(on: TestServer, statement: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
  on.run(Effect.flatMap(SqlClient.SqlClient, statement) as Effect.Effect<A, unknown, never>)

const proofOf = (receiptId: string, bearer = reader, on: TestServer = server) =>
  request(on, "GET", `/api/v1/reliance-receipts/${receiptId}/proof`, { bearer })

const pinned = () => ({ verifierKey: pinnedVerifierKey, receiptKeys: jwks })

/**
 * Readers reuse a partial tile for 500 ms and the latest checkpoint for 200 ms, by the service's clock
 * (src/log/TransparencyLog.ts); full tiles are immutable and kept. Moving the server's clock past those
 * windows makes the next read go to the database, without waiting in real time.
 */
const untilPartialTilesReread = () => server.clock.advance(600)
const untilCheckpointReread = () => server.clock.advance(300)

beforeAll(async () => {
  server = await startTestServer({ config: logConfig })
  asOf = Date.now() - DAY_MS
  writer = (await createKey(server, ["receipt:write", "receipt:read", "trust:read"], { rate_limit_per_minute: 1_000_000 })).api_key
  reader = (await createKey(server, ["receipt:read", "trust:read", "mcp:call"], { rate_limit_per_minute: 1_000_000 })).api_key
  otherTenant = (await createKey(server, ["receipt:read", "mcp:call"], { tenant_id: "tenant-b" })).api_key
  for (const subject of subjects) await updateDetermination(subject)
  jwks = (await request(server, "GET", "/api/v1/events/keys")).body
})

afterAll(async () => {
  await server?.close()
  rmSync(scratch, { recursive: true, force: true })
})

describe(`transparency log (${kind})`, () => {
  it("publishes its origin and note verifier key, and a checkpoint signed by it (also at the root /log/)", async () => {
    const key = await request(server, "GET", "/api/v1/log/key")
    expect(key.status).toBe(200)
    expect(key.body).toEqual({ origin, verifier_key: pinnedVerifierKey })
    const reply = await request(server, "GET", "/log/checkpoint")
    expect(reply.status).toBe(200)
    expect(reply.headers.get("content-type")).toBe("text/plain; charset=utf-8")
    expect(reply.headers.get("cache-control")).toBe("no-cache")
    expect(reply.text).toMatch(/^localhost\/pv-log\n\d+\n[A-Za-z0-9+/]{43}=\n\n\u2014 localhost\/pv-log [A-Za-z0-9+/]+=*\n$/)
    expect(openCheckpoint(reply.text, pinnedVerifierKey).ok).toBe(true)
    expect((await request(server, "GET", "/log/key", { headers: { origin: "https://elsewhere.example" } })).headers.get("access-control-allow-origin")).toBe("*")
  })

  it("serves its tlog-policy without witnesses: the log line and `quorum none` (also under /api/v1)", async () => {
    for (const path of ["/log/policy", "/api/v1/log/policy"]) {
      const reply = await request(server, "GET", path)
      expect(reply.status).toBe(200)
      expect(reply.headers.get("content-type")).toBe("text/plain; charset=utf-8")
      expect(reply.text).toBe(`log ${pinnedVerifierKey}\nquorum none\n`)
    }
  })

  it("signs every receipt over \"pv-receipt-v1\\n\" + receipt_digest with a key of /events/keys; replays and reads return the stored signature", async () => {
    const body = receiptBody(subjects[0]!)
    const created = await request(server, "POST", "/api/v1/reliance-receipts", { bearer: writer, body })
    expect(created.status, created.text).toBe(201)
    receipts.set(created.body.receipt_id, created.body)
    const { signature } = created.body
    expect(Object.keys(signature).sort()).toEqual(["alg", "kid", "sig"])
    expect(signature.alg).toBe("Ed25519")
    expect(jwks.keys.map((k: any) => k.kid)).toContain(signature.kid)
    expect(verifyReceiptSignature(created.body.receipt_digest, signature, keysFromJwks(jwks))).toEqual({ ok: true, value: signature.kid })
    expect(created.body.snapshot_payload.signature).toBeUndefined()
    const replay = await request(server, "POST", "/api/v1/reliance-receipts", { bearer: writer, body })
    expect(replay.status).toBe(200)
    expect(replay.body.signature).toEqual(signature)
    const read = await request(server, "GET", `/api/v1/reliance-receipts/${created.body.receipt_id}`, { bearer: reader })
    expect(read.body.signature).toEqual(signature)
    const stored = await sql(server, (q) => q<{ receipt: any }>`SELECT receipt FROM reliance_receipts WHERE receipt_id = ${created.body.receipt_id}`)
    expect(stored[0]!.receipt.signature).toEqual(signature)
  })

  it("covers every acknowledged write with a checkpoint within 2 s; every checkpoint is consistent with every earlier one", async () => {
    const seen: Array<Seen> = [await checkpointOf()]
    for (let round = 0; round < 4; round++) {
      await createReceipts(6)
      await updateDetermination(subjects[round % 2]!)
      const acknowledged = Date.now()
      const expected = (await expectedEntries()).length
      seen.push(await checkpointCovering(expected, server, 2_000))
      expect(Date.now() - acknowledged).toBeLessThan(2_000)
    }
    for (let i = 0; i < seen.length; i++) {
      for (let j = i + 1; j < seen.length; j++) {
        const proof = await request(server, "GET", `/log/proof/consistency?first=${seen[i]!.size}&second=${seen[j]!.size}`)
        expect(proof.status, proof.text).toBe(200)
        expect(proof.body).toMatchObject({ first: seen[i]!.size, second: seen[j]!.size })
        const verdict = verifyCheckpointConsistency(seen[i]!.note, seen[j]!.note, proof.body.consistency_path, pinnedVerifierKey)
        expect(verdict.ok, JSON.stringify(verdict)).toBe(true)
      }
    }
    expect(seen[seen.length - 1]!.size).toBeGreaterThan(seen[0]!.size)
  })

  it("holds exactly one entry per receipt and per event, at gapless indexes, in the JCS form of docs/API.md §11.1", async () => {
    const expected = await expectedEntries()
    const { size } = await checkpointCovering(expected.length)
    expect(size).toBe(expected.length)
    const entries = await servedEntries(size)
    expect(entries).toHaveLength(size)
    for (const entry of entries) expect(parseEntryBytes(entry).ok).toBe(true)
    expect(entries.map((entry) => Buffer.from(entry).toString("utf8")).sort()).toEqual(expected)
  })

  it("serves tiles whose hashes, recomputed from the entry bundles, give the checkpoint's root (level-0 and level-1 tiles)", async () => {
    await createReceipts(560 - (await expectedEntries()).length)
    const expected = await expectedEntries()
    const checkpoint = await checkpointCovering(expected.length, server, 10_000)
    expect(checkpoint.size).toBeGreaterThan(512)
    const leaves = (await servedEntries(checkpoint.size)).map(leafHash)
    const subtree = subtreeHashesOf(leaves)
    expect(hexOf(rootOf(checkpoint.size, subtree))).toBe(checkpoint.root)
    const tiles = await servedTiles(checkpoint.size)
    expect([...tiles.keys()]).toContain("tile/1/000.p/2")
    for (const tile of tilesOf(checkpoint.size)) expect(hexOf(tiles.get(tilePath(tile))!), tilePath(tile)).toBe(hexOf(tileHashes(tile, subtree)))
    const fromTiles = rootFromTiles(checkpoint.size, (tile) => tiles.get(tilePath(tile)))
    expect(fromTiles.ok && hexOf(fromTiles.value)).toBe(checkpoint.root)
  })

  it("marks full tiles immutable, serves a partial tile only at the published width, and answers 404 beyond the tree or for a malformed path", async () => {
    const { size } = await checkpointOf()
    const full = await bytesAt("/log/tile/0/000")
    expect(full.status).toBe(200)
    expect(full.headers.get("content-type")).toBe("application/octet-stream")
    expect(full.headers.get("cache-control")).toBe("public, max-age=31536000, immutable")
    expect(full.bytes).toHaveLength(256 * 32)
    const bundle = await bytesAt("/log/tile/entries/001")
    expect(bundle.headers.get("cache-control")).toBe("public, max-age=31536000, immutable")
    const width = size % 256
    const partial = await bytesAt(`/log/tile/0/${String(Math.floor(size / 256)).padStart(3, "0")}.p/${width}`)
    expect(partial.status).toBe(200)
    expect(partial.bytes).toHaveLength(width * 32)
    expect(partial.headers.get("cache-control")).toBe("no-cache")
    for (const path of [
      `/log/tile/0/${String(Math.floor(size / 256)).padStart(3, "0")}.p/${width - 1}`,
      `/log/tile/0/${String(Math.floor(size / 256)).padStart(3, "0")}`,
      "/log/tile/0/999", "/log/tile/0/x001/000", "/log/tile/entries/999", "/log/tile/3/000",
      "/log/tile/0/1", "/log/tile/0/000.p/0", "/log/tile/0/000.p/256", "/log/tile/x/000", "/log/tile/entries/000.p/abc", "/log/tile/"
    ]) {
      expectProblem(await request(server, "GET", path), 404, "not-found")
    }
  })

  it("answers inclusion and consistency proofs that verify, and refuses sizes outside the published tree with 400 validation-failed", async () => {
    const checkpoint = await checkpointOf()
    const root = openCheckpoint(checkpoint.note, pinnedVerifierKey)
    const leaves = (await servedEntries(checkpoint.size)).map(leafHash)
    for (const index of [0, 1, 255, 256, checkpoint.size - 1]) {
      const proof = await request(server, "GET", `/api/v1/log/proof/inclusion?index=${index}&tree_size=${checkpoint.size}`)
      expect(proof.status, proof.text).toBe(200)
      expect(proof.body).toMatchObject({ index, tree_size: checkpoint.size, leaf_hash: hexOf(leaves[index]!) })
      expect(root.ok && verifyInclusionProof(proof.body, root.value.root)).toBe(true)
    }
    expect((await request(server, "GET", `/log/proof/consistency?first=0&second=${checkpoint.size}`)).body.consistency_path).toEqual([])
    expect((await request(server, "GET", `/log/proof/consistency?first=${checkpoint.size}&second=${checkpoint.size}`)).body.consistency_path).toEqual([])
    const beyond = checkpoint.size + 1_000_000
    for (const query of [
      `inclusion?index=0&tree_size=${beyond}`, `inclusion?index=${checkpoint.size}&tree_size=${checkpoint.size}`, "inclusion?index=0&tree_size=0",
      "inclusion?index=-1&tree_size=1", "inclusion?index=01&tree_size=5", "inclusion?index=1e3&tree_size=5000", "inclusion?tree_size=5",
      `inclusion?index=0&tree_size=${"9".repeat(30)}`, `consistency?first=2&second=1`, `consistency?first=0&second=${beyond}`, "consistency?first=x&second=1",
      "consistency?second=1"
    ]) {
      const body = expectProblem(await request(server, "GET", `/api/v1/log/proof/${query}`), 400, "validation-failed")
      expect(body.errors?.[0]?.pointer, query).toMatch(/^\/(index|tree_size|first|second)$/)
    }
  })

  it("gives a receipt's proof bundle that verifies offline with pinned keys, step by step", async () => {
    const receipt = [...receipts.values()][3]
    await checkpointCovering((await expectedEntries()).length)
    const reply = await proofOf(receipt.receipt_id)
    expect(reply.status, reply.text).toBe(200)
    const bundle = reply.body
    expect(Object.keys(bundle).sort()).toEqual(["checkpoint", "inclusion_path", "leaf_index", "log_entry", "receipt", "receipt_key", "verifier_key"])
    const { idempotent: _, ...stored } = receipt
    expect(bundle.receipt).toEqual(stored)
    expect(bundle.log_entry).toEqual(receiptEntryOf(receipt))
    expect(bundle.verifier_key).toBe(pinnedVerifierKey)
    expect(bundle.receipt_key.kid).toBe(receipt.signature.kid)
    const verdict = verifyReceiptBundle(bundle, pinned())
    expect(verdict.steps.map((s) => [s.step, s.ok])).toEqual(
      ["digest", "entry", "leaf", "inclusion", "checkpoint_signature", "receipt_signature"].map((step) => [step, true]))
    expect(verdict).toMatchObject({ ok: true, keys: { verifier_key: "pinned", receipt_key: "pinned" } })
    // The leaf index is the receipt's entry in the served bundles.
    const entries = await servedEntries((await checkpointOf()).size)
    expect(Buffer.from(entries[bundle.leaf_index]!).toString("utf8")).toBe(canonicalJson(receiptEntryOf(receipt)))
  })

  it("applies the receipt tenant rule to proofs: another tenant's receipt is 404 receipt-not-found, and receipt:read is required", async () => {
    const receipt = [...receipts.values()][0]
    expectProblem(await proofOf(receipt.receipt_id, otherTenant), 404, "receipt-not-found")
    expectProblem(await proofOf("rr_01ARZ3NDEKTSV4RRFFQ69G5FAV"), 404, "receipt-not-found")
    expectProblem(await proofOf(receipt.receipt_id, writer.replace(/.$/, (c) => (c === "A" ? "B" : "A"))), 401, "unauthorized")
    const noRead = (await createKey(server, ["receipt:write"])).api_key
    expectProblem(await proofOf(receipt.receipt_id, noRead), 403, "insufficient-scope")
  })

  it("MCP get_reliance_receipt returns the signed receipt, and with include_proof: true the bundle (official SDK client)", async () => {
    const receipt = [...receipts.values()][5]
    const client = new Client({ name: "pv-log-test", version: "1.0.0" })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.baseUrl}/api/v1/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${reader}` } }
    }))
    try {
      const { tools } = await client.listTools()
      const tool = tools.find((t) => t.name === "get_reliance_receipt")!
      expect(tool.inputSchema.properties).toHaveProperty("include_proof")
      expect(tool.outputSchema?.type).toBe("object")
      const plain = await client.callTool({ name: "get_reliance_receipt", arguments: { receipt_id: receipt.receipt_id } })
      expect((plain.structuredContent as any).signature).toEqual(receipt.signature)
      const withProof = await client.callTool({ name: "get_reliance_receipt", arguments: { receipt_id: receipt.receipt_id, include_proof: true } })
      const bundle = withProof.structuredContent as any
      expect(JSON.parse((withProof.content as Array<{ text: string }>)[0]!.text)).toEqual(bundle)
      expect(verifyReceiptBundle(bundle, pinned()).ok).toBe(true)
      const theirs = new Client({ name: "pv-log-test-b", version: "1.0.0" })
      await theirs.connect(new StreamableHTTPClientTransport(new URL(`${server.baseUrl}/api/v1/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${otherTenant}` } }
      }))
      await expect(theirs.callTool({ name: "get_reliance_receipt", arguments: { receipt_id: receipt.receipt_id, include_proof: true } }))
        .rejects.toMatchObject({ code: -32000, data: { code: "receipt-not-found" } })
      await theirs.close()
    } finally {
      await client.close()
    }
  })

  it("pv verify-receipt checks a saved bundle offline, prints each step and names the first failing one (exit 1)", async () => {
    const receipt = [...receipts.values()][7]
    const bundle = (await proofOf(receipt.receipt_id)).body
    const good = join(scratch, "bundle.json")
    const bad = join(scratch, "tampered.json")
    const keys = join(scratch, "jwks.json")
    writeFileSync(good, JSON.stringify(bundle))
    writeFileSync(keys, JSON.stringify(jwks))
    const tampered = structuredClone(bundle)
    tampered.receipt.decision = tampered.receipt.decision === "ACTIONABLE" ? "NOT_ACTIONABLE" : "ACTIONABLE"
    writeFileSync(bad, JSON.stringify(tampered))
    const verdict = await Effect.runPromise(verifyReceiptCommand({ file: good, verifierKey: pinnedVerifierKey, jwks: keys }))
    expect(verdict.ok).toBe(true)
    const refused = await Effect.runPromiseExit(verifyReceiptCommand({ file: bad, verifierKey: pinnedVerifierKey, jwks: keys }))
    expect(Exit.isFailure(refused) && String(refused.cause)).toMatch(/FAILED at step digest/)
    const cli = (file: string, ...extra: Array<string>) => runEntry(["src/cli/main.ts", "verify-receipt", file, ...extra], childEnvironment({}))
    const ok = await cli(good, "--verifier-key", pinnedVerifierKey, "--jwks", keys)
    expect(ok.status, ok.stderr).toBe(0)
    expect(ok.stdout).toMatch(/✓ digest[\s\S]*✓ inclusion[\s\S]*✓ checkpoint_signature[\s\S]*✓ receipt_signature[\s\S]*OK receipt/)
    const failing = await cli(bad, "--verifier-key", pinnedVerifierKey, "--jwks", keys)
    expect(failing.status).toBe(1)
    expect(failing.stdout).toMatch(/✗ digest/)
    expect(failing.stderr).toMatch(/FAILED at step digest/)
  })

  it("pv log monitor pins the key, accepts a consistent newer checkpoint, and exits non-zero on a bad signature or a fork", async () => {
    const state = join(scratch, "monitor.json")
    const first = await Effect.runPromise(logMonitorCommand({ baseUrl: server.baseUrl, state }))
    expect(JSON.parse(readFileSync(state, "utf8")).verifier_key).toBe(pinnedVerifierKey)
    await createReceipts(3)
    await checkpointCovering(first.size + 3)
    const second = await Effect.runPromise(logMonitorCommand({ baseUrl: server.baseUrl, state }))
    expect(second.previous_size).toBe(first.size)
    expect(second.size).toBeGreaterThan(first.size)
    // Not spawnSync: the server under test runs in this process and must keep answering.
    const cli = await new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = spawn(process.execPath, [compiledEntry("src/cli/main.ts"), "log", "monitor", "--base-url", server.baseUrl, "--state", state], {
        cwd: root,
        env: childEnvironment({})
      })
      let output = ""
      child.stdout.on("data", (chunk) => (output += chunk))
      child.stderr.on("data", (chunk) => (output += chunk))
      child.once("close", (code) => resolve({ code, output }))
    })
    expect(cli.code, cli.output).toBe(0)
    expect(cli.output).toMatch(/OK both checkpoints are of size|OK the tree of size/)

    const otherKey = verifierKeyOfSigner(origin, privateKeyFromSeed(Buffer.alloc(32, 42)))
    const wrong = await Effect.runPromiseExit(logMonitorCommand({ baseUrl: server.baseUrl, state: join(scratch, "wrong-key.json"), verifierKey: otherKey }))
    expect(Exit.isFailure(wrong) && String(wrong.cause)).toMatch(/does not verify/)

    // The operator (who holds the key) signs another root for the size the monitor has seen: a fork.
    const latest = await checkpointOf()
    const forged = signCheckpoint({ origin, size: latest.size, root: randomBytes(32), extensions: [] }, logSigner)
    await sql(server, (q) => q`UPDATE log_checkpoints SET note = ${forged} WHERE tree_size = ${latest.size}`)
    try {
      untilCheckpointReread()
      const forkState = join(scratch, "fork.json")
      writeFileSync(forkState, JSON.stringify({ verifier_key: pinnedVerifierKey, checkpoint: latest.note, checked_at: "" }))
      const fork = await Effect.runPromiseExit(logMonitorCommand({ baseUrl: server.baseUrl, state: forkState }))
      expect(Exit.isFailure(fork) && String(fork.cause)).toMatch(/FORK/)
      expect(JSON.parse(readFileSync(forkState, "utf8")).checkpoint, "a refused checkpoint is not recorded").toBe(latest.note)
      // The integrator refuses to extend a tree whose stored hashes no longer give the published root.
      // (A round of the server's own integrator may hold the integration lock at that moment: `locked: false`,
      // nothing done; then ask again.)
      const refusal = async (): Promise<unknown> => {
        for (let attempt = 0; attempt < 50; attempt++) {
          const round = await server.run(Effect.flatMap(LogIntegrator, (i) => i.integrateOnce))
          if (round.locked) return round
          await new Promise((resolve) => setTimeout(resolve, 20))
        }
        throw new Error("the integration lock was never free")
      }
      await expect(refusal()).rejects.toThrow(/refusing to integrate/)
    } finally {
      await sql(server, (q) => q`UPDATE log_checkpoints SET note = ${latest.note} WHERE tree_size = ${latest.size}`)
    }
    untilCheckpointReread()
    expect((await checkpointOf()).note).toBe(latest.note)
  })

  it("detects a tampered entry, leaf hash or tile hash in the database: tiles no longer match, the bundle's inclusion step fails", async () => {
    // The last entry must be in a partial bundle (a full one is cached for ever, tampered or not): one more
    // receipt while the covering checkpoint's size is a multiple of 256 (the server appends events of its own too).
    let checkpoint = await checkpointCovering((await expectedEntries()).length)
    while (checkpoint.size % 256 === 0) {
      await createReceipts(1)
      checkpoint = await checkpointCovering((await expectedEntries()).length)
    }
    const size = checkpoint.size
    const last = size - 1

    // 1. An entry's bytes (the receipt_digest inside it): the entry bundles no longer hash to the checkpoint's root.
    // bytea comes back as a Uint8Array (@effect/sql-pg's decoding).
    const [row] = await sql(server, (q) => q<{ entry: Uint8Array }>`SELECT entry FROM log_entries WHERE idx = ${last}`)
    const text = Buffer.from(row!.entry).toString("utf8")
    const altered = Buffer.from(text.replace(/"(eventHash|receipt_digest)":"(.)/, (_m, name, c) => `"${name}":"${c === "0" ? "1" : "0"}`), "utf8")
    expect(altered.equals(row!.entry)).toBe(false)
    expect(parseEntryBytes(altered).ok, "still a well-formed entry").toBe(true)
    await sql(server, (q) => q`UPDATE log_entries SET entry = ${altered} WHERE idx = ${last}`)
    try {
      const leaves = (await servedEntries(size)).map(leafHash)
      expect(hexOf(rootOf(size, subtreeHashesOf(leaves)))).not.toBe(checkpoint.root)
    } finally {
      await sql(server, (q) => q`UPDATE log_entries SET entry = ${row!.entry} WHERE idx = ${last}`)
    }
    expect(hexOf(rootOf(size, subtreeHashesOf((await servedEntries(size)).map(leafHash))))).toBe(checkpoint.root)

    // 2. A leaf hash next to a receipt's: its proof bundle fails at the inclusion step; the served tiles miss the root.
    const entries = (await servedEntries(size)).map((entry) => parseEntryBytes(entry))
    const index = entries.findIndex((entry, i) => i >= Math.floor(last / 256) * 256 && (i ^ 1) <= last && entry.ok && entry.value.type === "pv.log.receipt.v1")
    expect(index).toBeGreaterThanOrEqual(0)
    const receiptId = (entries[index] as { value: { receipt_id: string } }).value.receipt_id
    const sibling = index ^ 1
    const [leafRow] = await sql(server, (q) => q<{ leaf_hash: Uint8Array }>`SELECT leaf_hash FROM log_entries WHERE idx = ${sibling}`)
    await sql(server, (q) => q`UPDATE log_entries SET leaf_hash = ${randomBytes(32)} WHERE idx = ${sibling}`)
    try {
      untilPartialTilesReread()
      const verdict = verifyReceiptBundle((await proofOf(receiptId)).body, pinned())
      expect(verdict.failed_step).toBe("inclusion")
      const tiles = await servedTiles(size)
      const fromTiles = rootFromTiles(size, (tile) => tiles.get(tilePath(tile)))
      expect(fromTiles.ok && hexOf(fromTiles.value)).not.toBe(checkpoint.root)
    } finally {
      await sql(server, (q) => q`UPDATE log_entries SET leaf_hash = ${leafRow!.leaf_hash} WHERE idx = ${sibling}`)
    }
    untilPartialTilesReread()

    // 3. A stored level-1 tile hash (the subtree of leaves 0..255): the receipt's path uses it, so inclusion fails again.
    const [tileRow] = await sql(server, (q) => q<{ hash: Uint8Array }>`SELECT hash FROM log_tile_hashes WHERE level = 1 AND idx = 0`)
    await sql(server, (q) => q`UPDATE log_tile_hashes SET hash = ${randomBytes(32)} WHERE level = 1 AND idx = 0`)
    try {
      untilPartialTilesReread()
      expect(verifyReceiptBundle((await proofOf(receiptId)).body, pinned()).failed_step).toBe("inclusion")
    } finally {
      await sql(server, (q) => q`UPDATE log_tile_hashes SET hash = ${tileRow!.hash} WHERE level = 1 AND idx = 0`)
    }
    untilPartialTilesReread()
    expect(verifyReceiptBundle((await proofOf(receiptId)).body, pinned()).ok).toBe(true)
  })

  it("the migration's SQL entry recipe (for rows stored before the log) gives the same bytes as the service's", async () => {
    const fromSql = await sql(server, (q) => q.unsafe<{ ref: string; entry: Uint8Array }>(
      `SELECT receipt_id AS ref, ${receiptEntrySql} AS entry FROM reliance_receipts UNION ALL SELECT event_id, ${eventEntrySql} FROM events`))
    const logged = await sql(server, (q) => q<{ ref: string; entry: Uint8Array }>`SELECT ref, entry FROM log_entries`)
    const byRef = new Map(logged.map((row) => [row.ref, Buffer.from(row.entry).toString("hex")]))
    expect(fromSql.length).toBeGreaterThan(500)
    for (const row of fromSql) expect(Buffer.from(row.entry).toString("hex"), row.ref).toBe(byRef.get(row.ref))
    const odd = { receipt_id: "rr_\"quoted\"\\\n\u0001é", receipt_digest: "a".repeat(64), created_at: "2031-01-01T00:00:00.000Z" }
    const [computed] = await sql(server, (q) => q.unsafe<{ entry: Uint8Array }>(
      `SELECT ${receiptEntrySql} AS entry FROM (SELECT $1::text AS receipt_id, $2::text AS receipt_digest, json_build_object('created_at', $3::text) AS receipt) r`,
      [odd.receipt_id, odd.receipt_digest, odd.created_at]))
    expect(Buffer.from(computed!.entry).toString("utf8")).toBe(Buffer.from(entryBytesOf(receiptEntryOf(odd))).toString("utf8"))
  })

  it("the start-up backfill signs a receipt stored without a signature exactly once, with the signature it would have had", async () => {
    const receipt = [...receipts.values()][1]
    await sql(server, (q) => q`UPDATE reliance_receipts SET receipt = (receipt::jsonb - 'signature')::json WHERE receipt_id = ${receipt.receipt_id}`)
    await sql(server, (q) => q`INSERT INTO receipt_signature_backfill (receipt_id) VALUES (${receipt.receipt_id})`)
    expect(await server.run(Effect.flatMap(Receipts, (r) => r.backfillSignatures))).toBe(1)
    expect(await server.run(Effect.flatMap(Receipts, (r) => r.backfillSignatures))).toBe(0)
    const [stored] = await sql(server, (q) => q<{ receipt: any }>`SELECT receipt FROM reliance_receipts WHERE receipt_id = ${receipt.receipt_id}`)
    expect(stored!.receipt.signature).toEqual(receipt.signature)
  })
})

describe(`transparency log before integration (${kind})`, () => {
  let paused: TestServer
  let pausedWriter: string
  beforeAll(async () => {
    paused = await startTestServer({ config: { logIntegrationIntervalMs: 0, logRateLimitPerMinute: 8 } })
    pausedWriter = (await createKey(paused, ["receipt:write", "receipt:read"])).api_key
    expect((await putDetermination(paused, subjects[0]!, determinationBody(Date.now() - DAY_MS))).status).toBe(201)
  })
  afterAll(() => paused?.close())

  it("answers a bundle requested before its entry is integrated with 404 not-yet-logged and Retry-After: 1, then serves it", async () => {
    const created = await request(paused, "POST", "/api/v1/reliance-receipts", { bearer: pausedWriter, body: receiptBody(subjects[0]!) })
    expect(created.status, created.text).toBe(201)
    const early = await proofOf(created.body.receipt_id, pausedWriter, paused)
    expectProblem(early, 404, "not-yet-logged")
    expect(early.headers.get("retry-after")).toBe("1")
    const round = await paused.run(Effect.flatMap(LogIntegrator, (integrator) => integrator.integrateOnce))
    expect(round).toEqual({ locked: true, size: 2, appended: 2 })
    const later = await proofOf(created.body.receipt_id, pausedWriter, paused)
    expect(later.status, later.text).toBe(200)
    expect(verifyReceiptBundle(later.body, { verifierKey: pinnedVerifierKey, receiptKeys: jwks }).ok).toBe(true)
  })

  it("integrates on its own only when entries are pending: an idle round reads nothing, a round with an entry to add checks the stored tree and refuses a changed one", async () => {
    const integrator = <A>(f: (i: LogIntegratorShape) => Effect.Effect<A>) => paused.run(Effect.flatMap(LogIntegrator, f))
    await integrator((i) => i.integrateOnce)
    const [latest] = await sql(paused, (q) => q<{ tree_size: string; root_hash: Uint8Array }>`SELECT tree_size::text, root_hash FROM log_checkpoints ORDER BY tree_size DESC LIMIT 1`)
    const size = Number(latest!.tree_size)
    // The stored checkpoint no longer states the tree's root: any round that reads it refuses.
    await sql(paused, (q) => q`UPDATE log_checkpoints SET root_hash = ${randomBytes(32)} WHERE tree_size = ${size}`)
    try {
      expect(await integrator((i) => i.integrateIfPending)).toEqual({ locked: true, size, appended: 0 })
      await expect(integrator((i) => i.integrateOnce)).rejects.toThrow(/refusing to integrate/)
      const created = await request(paused, "POST", "/api/v1/reliance-receipts", { bearer: pausedWriter, body: receiptBody(subjects[0]!) })
      expect(created.status, created.text).toBe(201)
      await expect(integrator((i) => i.integrateIfPending)).rejects.toThrow(/refusing to integrate/)
    } finally {
      await sql(paused, (q) => q`UPDATE log_checkpoints SET root_hash = ${latest!.root_hash} WHERE tree_size = ${size}`)
    }
    expect(await integrator((i) => i.integrateIfPending)).toEqual({ locked: true, size: size + 1, appended: 1 })
  })

  it("pv log monitor exits non-zero on a rollback: a log with the same key showing a smaller tree than the one it saw", async () => {
    const state = join(scratch, "rollback.json")
    writeFileSync(state, JSON.stringify({ verifier_key: pinnedVerifierKey, checkpoint: (await checkpointOf()).note, checked_at: "" }))
    const rollback = await Effect.runPromiseExit(logMonitorCommand({ baseUrl: paused.baseUrl, state }))
    expect(Exit.isFailure(rollback) && String(rollback.cause)).toMatch(/ROLLBACK/)
  })

  it("limits the log endpoints per client address (429 rate-limited with Retry-After)", async () => {
    let limited: Awaited<ReturnType<typeof request>> | undefined
    for (let i = 0; i < 12 && limited === undefined; i++) {
      const reply = await request(paused, "GET", "/log/checkpoint")
      if (reply.status !== 200) limited = reply
    }
    expect(limited).toBeDefined()
    expectProblem(limited!, 429, "rate-limited")
    expect(limited!.headers.get("retry-after")).toMatch(/^\d+$/)
    expectProblem(await request(paused, "GET", "/log/policy"), 429, "rate-limited")
  })
})

describe.runIf(kind === "postgres")("transparency log with two instances on one PostgreSQL", () => {
  let second: TestServer
  beforeAll(async () => {
    second = await startTestServer({ databaseUrl: server.databaseUrl!, config: logConfig })
  })
  afterAll(() => second?.close())

  it("never forks: writes through both, every checkpoint either serves is consistent with every other, indexes gapless, one entry per write", async () => {
    const seen = new Map<number, Seen>()
    const record = (checkpoint: Seen) => {
      const earlier = seen.get(checkpoint.size)
      if (earlier !== undefined) expect(checkpoint.root, `two roots for size ${checkpoint.size}`).toBe(earlier.root)
      seen.set(checkpoint.size, checkpoint)
    }
    let writing = true
    const watcher = (async () => {
      while (writing) {
        record(await checkpointOf(server))
        record(await checkpointOf(second))
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
    })()
    try {
      await Promise.all([
        createReceipts(60, server, 8),
        createReceipts(60, second, 8),
        (async () => {
          for (let i = 0; i < 6; i++) await updateDetermination(subjects[i % 2]!, i % 2 === 0 ? server : second)
        })()
      ])
    } finally {
      writing = false
      await watcher
    }
    const expected = await expectedEntries()
    record(await checkpointCovering(expected.length, second))
    record(await checkpointCovering(expected.length, server))
    const sizes = [...seen.keys()].sort((a, b) => a - b)
    expect(sizes.length).toBeGreaterThan(2)
    for (let i = 0; i + 1 < sizes.length; i++) {
      const [a, b] = [seen.get(sizes[i]!)!, seen.get(sizes[i + 1]!)!]
      const proof = await request(i % 2 === 0 ? server : second, "GET", `/log/proof/consistency?first=${a.size}&second=${b.size}`)
      const verdict = verifyCheckpointConsistency(a.note, b.note, proof.body.consistency_path, pinnedVerifierKey)
      expect(verdict.ok, JSON.stringify(verdict)).toBe(true)
    }
    const size = sizes[sizes.length - 1]!
    expect(size).toBe(expected.length)
    // As text: @effect/sql-pg decodes int8 to bigint.
    const indexes = await sql(server, (q) => q<{ n: string; low: string; high: string }>`SELECT count(*)::text AS n, min(idx)::text AS low, max(idx)::text AS high FROM log_entries`)
    expect(indexes[0]).toEqual({ n: String(size), low: "0", high: String(size - 1) })
    expect((await servedEntries(size, second)).map((entry) => Buffer.from(entry).toString("utf8")).sort()).toEqual(expected)
  })

  it("a receipt whose stored JSON was edited fails verification at the digest step (read by an instance that never cached it)", async () => {
    const receipt = await createReceipt(server)
    await checkpointCovering((await expectedEntries()).length, server)
    await sql(server, (q) => q`
      UPDATE reliance_receipts SET receipt = replace(receipt::text, ${`"decision":"${receipt.decision}"`}, '"decision":"FORGED"')::json
      WHERE receipt_id = ${receipt.receipt_id}`)
    const bundle = (await proofOf(receipt.receipt_id, reader, second)).body
    expect(bundle.receipt.decision).toBe("FORGED")
    const verdict = verifyReceiptBundle(bundle, pinned())
    expect(verdict.failed_step).toBe("digest")
  })
})
