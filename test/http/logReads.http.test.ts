import { createHash, randomBytes } from "node:crypto"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { openCheckpoint } from "../../src/log/Checkpoint.js"
import { entryBytesOf, eventEntryOf } from "../../src/log/Entries.js"
import { testLogSigningSeed } from "../../src/log/LogKey.js"
import { verifierKeyOfSigner } from "../../src/log/Note.js"
import { privateKeyFromSeed } from "../../src/events/Signer.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, expectProblem, putDetermination, request } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"

/**
 * The log's public reads (docs/API.md §11) as a client sees them, on each database: the answers the front door
 * gives from memory (log/FastReads.ts) are those of the general handlers, byte for byte and header for header
 * (a request with `x-pv-internal-token` always takes the general path); conditional requests (strong ETag of
 * the exact bytes, If-None-Match → 304 per RFC 9110) on tiles, the checkpoint and proofs; the per-address
 * limit and CORS on answers from memory.
 */

const kind = process.env.PV_TEST_DB ?? "pglite"
const pinnedVerifierKey = verifierKeyOfSigner("localhost/pv-log", privateKeyFromSeed(testLogSigningSeed))
const subject = "DET-V1-LOGREADS-0001"

let server: TestServer
let limited: TestServer
let writer: string
let principal = 0

const createReceipts = async (on: TestServer, bearer: string, count: number, concurrency = 16) => {
  let left = count
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, async () => {
    while (left-- > 0) {
      const reply = await request(on, "POST", "/api/v1/reliance-receipts", {
        bearer,
        body: {
          tenant_id: "tenant-a",
          organization: "Log Readers",
          principal: `reader-${principal++}`,
          subject_public_id: subject,
          purpose_id: "supplier-onboarding",
          requested_action: "screen",
          claim_scope: ["identity"]
        }
      })
      expect(reply.status, reply.text).toBe(201)
    }
  }))
}

const checkpointOf = async (on: TestServer = server) => {
  const reply = await request(on, "GET", "/log/checkpoint")
  expect(reply.status, reply.text).toBe(200)
  const opened = openCheckpoint(reply.text, pinnedVerifierKey)
  if (!opened.ok) throw new Error(opened.detail)
  return { note: reply.text, size: opened.value.size, etag: reply.headers.get("etag") }
}

const checkpointCovering = async (size: number, on: TestServer = server) => {
  const deadline = Date.now() + 10_000
  for (;;) {
    const seen = await checkpointOf(on)
    if (seen.size >= size) return seen
    if (Date.now() > deadline) throw new Error(`no checkpoint covers ${size} entries (latest ${seen.size})`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

const get = async (path: string, headers: Record<string, string> = {}, on: TestServer = server) => {
  const response = await fetch(on.baseUrl + path, { headers })
  return { status: response.status, headers: response.headers, bytes: Buffer.from(await response.arrayBuffer()) }
}

/** What a client may rely on: every header but the per-request ones. */
const stableHeaders = (headers: Headers) =>
  Object.fromEntries([...headers].filter(([name]) => !["x-request-id", "date"].includes(name)))

const strongEtag = (bytes: Uint8Array) => `"${createHash("sha256").update(bytes).digest("base64url")}"`

/** Through the general handlers (the front door answers nothing with this header from memory). */
const general = { "x-pv-internal-token": "anything" }

const sql = <A>(on: TestServer, statement: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
  on.run(Effect.flatMap(SqlClient.SqlClient, statement) as Effect.Effect<A, unknown, never>)

/**
 * Whether a read ahead brings a change to the stored rows before what was read lapses. `prepare` has the server read
 * (between two instants of its clock it returns), then changes the rows; `path` is then read with the clock held
 * `heldMs` past the read's end until an answer that came back within `freshMs` of its start shows the change (true:
 * what was read was still fresh, so only a read ahead can have brought it), or 10 s of real time pass (false). An
 * answer that came back later may have read the database after the lapse, and a read that took so long that the held
 * clock is past `freshMs` of its start leaves no time to see a read ahead: `prepare` then runs again.
 * Holding the clock can move it back (when more than `heldMs` of real time passed since the read's end), so a read ahead
 * may have started at a later instant than the clock now shows: `clockPeak` keeps the latest instant the server's clock
 * showed, from which a test waits out what was read ahead.
 */
let clockPeak = 0
const passPeak = () => (clockPeak = Math.max(clockPeak, server.clock.currentTimeMillisUnsafe()))
/** Moves the server's clock `ms` past the latest instant it showed (`clockPeak`), so everything read by then has lapsed. */
const beyondPeak = (ms: number) => server.clock.setTo(Math.max(passPeak(), server.clock.currentTimeMillisUnsafe()) + ms)
const seenAhead = async (path: string, heldMs: number, freshMs: number, prepare: () => Promise<readonly [number, number]>, changed: (bytes: Buffer) => boolean) => {
  const deadline = Date.now() + 10_000
  let [from, to] = await prepare()
  for (;;) {
    if (to + heldMs - from >= freshMs - 5 && Date.now() < deadline) {
      [from, to] = await prepare()
      continue
    }
    passPeak()
    server.clock.setTo(to + heldMs)
    const answer = await get(path)
    const late = server.clock.currentTimeMillisUnsafe() - from >= freshMs
    expect(answer.status, path).toBe(200)
    if (!late && changed(answer.bytes)) return true
    if (Date.now() > deadline) return false
    if (late) [from, to] = await prepare()
    else await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

let size = 0
let paths: ReadonlyArray<string> = []

beforeAll(async () => {
  server = await startTestServer({ config: { logRateLimitPerMinute: 1_000_000 } })
  writer = (await createKey(server, ["receipt:write"], { rate_limit_per_minute: 1_000_000 })).api_key
  expect((await putDetermination(server, subject, determinationBody(Date.now() - DAY_MS))).status).toBe(201)
  await createReceipts(server, writer, 300)
  ;({ size } = await checkpointCovering(301))
  const partial = `/log/tile/0/001.p/${size - 256}`
  paths = [
    "/log/tile/0/000", "/api/v1/log/tile/0/000", "/log/tile/entries/000", partial, `/log/tile/entries/001.p/${size - 256}`,
    "/log/tile/1/000.p/1", "/log/checkpoint", "/api/v1/log/key", "/log/key",
    `/log/proof/inclusion?index=3&tree_size=${size}`, `/api/v1/log/proof/inclusion?index=${size - 1}&tree_size=${size}`,
    `/log/proof/consistency?first=7&second=${size}`, `/api/v1/log/proof/consistency?first=256&second=${size}`
  ]
})

afterAll(async () => {
  await server?.close()
  await limited?.close()
})

describe(`the log's reads from memory and conditional requests (${kind})`, () => {
  it("answers every read with the general handler's status, bytes and headers, also to a browser origin", async () => {
    for (const path of paths) {
      for (const origin of [{}, { origin: "https://elsewhere.example" }]) {
        // Twice: the first answer may fill the caches the second is served from.
        const reference = await get(path, { ...general, ...origin })
        expect(reference.status, path).toBe(200)
        for (let i = 0; i < 2; i++) {
          const answer = await get(path, origin)
          expect(answer.status, path).toBe(200)
          expect(answer.bytes.equals(reference.bytes), path).toBe(true)
          expect(stableHeaders(answer.headers), path).toEqual(stableHeaders(reference.headers))
          expect(answer.headers.get("x-request-id"), path).toMatch(/\S/)
        }
      }
    }
    expect((await get("/log/tile/0/000", { origin: "https://elsewhere.example" })).headers.get("access-control-allow-origin")).toBe("*")
  })

  it("tags tiles, the checkpoint, proofs and the key with a strong ETag of their exact bytes and keeps the caching rules", async () => {
    const expected: Record<string, string | null> = {
      "/log/tile/0/000": "public, max-age=31536000, immutable",
      "/log/tile/entries/000": "public, max-age=31536000, immutable",
      [`/log/tile/0/001.p/${size - 256}`]: "no-cache",
      "/log/checkpoint": "no-cache",
      [`/log/proof/inclusion?index=3&tree_size=${size}`]: null,
      [`/log/proof/consistency?first=7&second=${size}`]: null,
      "/log/key": null
    }
    for (const [path, cacheControl] of Object.entries(expected)) {
      for (const headers of [{}, general]) {
        const answer = await get(path, headers)
        expect(answer.status, path).toBe(200)
        expect(answer.headers.get("etag"), path).toBe(strongEtag(answer.bytes))
        expect(answer.headers.get("cache-control"), path).toBe(cacheControl)
      }
    }
  })

  it("answers If-None-Match per RFC 9110: 304 without a body, with Cache-Control and ETag, for a matching tag, a weak one, one of a list, or *", async () => {
    for (const path of paths) {
      const fresh = await get(path)
      const etag = fresh.headers.get("etag")!
      expect(etag, path).toMatch(/^"[A-Za-z0-9_-]{43}"$/)
      for (const headers of [{}, general]) {
        for (const condition of [etag, `W/${etag}`, `"other", ${etag}`, `"a",W/"b" ,  ${etag}`, "*"]) {
          const answer = await get(path, { ...headers, "if-none-match": condition })
          expect(answer.status, `${path} ${condition}`).toBe(304)
          expect(answer.bytes.length, path).toBe(0)
          expect(answer.headers.get("etag"), path).toBe(etag)
          expect(answer.headers.get("cache-control"), path).toBe(fresh.headers.get("cache-control"))
          expect(answer.headers.get("content-type"), path).toBeNull()
        }
        for (const condition of [`"other"`, `"other", W/"else"`, etag.slice(0, -2) + `"`, etag.slice(1, -1)]) {
          const answer = await get(path, { ...headers, "if-none-match": condition })
          expect(answer.status, `${path} ${condition}`).toBe(200)
          expect(answer.bytes.equals(fresh.bytes), path).toBe(true)
        }
      }
    }
    // Only an existing representation matches `*`: what does not exist stays 404 / 400.
    for (const headers of [{}, general]) {
      expectProblem(await request(server, "GET", "/log/tile/0/999", { headers: { ...headers, "if-none-match": "*" } }), 404, "not-found")
      expectProblem(await request(server, "GET", `/log/proof/inclusion?index=0&tree_size=${size + 5}`, { headers: { ...headers, "if-none-match": "*" } }), 400, "validation-failed")
    }
  })

  it("changes the checkpoint's ETag when the checkpoint changes: the old tag then gets the new checkpoint", async () => {
    const before = await checkpointOf()
    await createReceipts(server, writer, 3)
    const after = await checkpointCovering(before.size + 3)
    expect(after.etag).not.toBe(before.etag)
    const revalidated = await get("/log/checkpoint", { "if-none-match": before.etag! })
    expect(revalidated.status).toBe(200)
    expect(revalidated.bytes.toString("utf8")).toBe((await checkpointOf()).note)
    expect((await get("/log/checkpoint", { "if-none-match": revalidated.headers.get("etag")! })).status).toBe(304)
  })

  it("limits answers from memory per client address like every log read (429 rate-limited with Retry-After)", async () => {
    limited = await startTestServer({ config: { logRateLimitPerMinute: 20 } })
    // A full tile to read: 260 entries queued in one statement, as writes queue theirs (log_pending, migration 0005),
    // for the integrator's next round (what they hold does not matter here; 260 receipts through the API cost ~1.5 s
    // of CPU). Read after that round, polled for in the database: every read of the log counts toward the limit.
    const entry = (sequence: number) => ({
      kind: "event",
      ref: `evt_limited_${sequence}`,
      entry: entryBytesOf(eventEntryOf({ public_id: subject, sequence, eventHash: randomBytes(32).toString("hex") }))
    })
    await sql(limited, (q) => q`INSERT INTO log_pending ${q.insert([entry(1), ...Array.from({ length: 259 }, (_, i) => entry(i + 2))])}`)
    // The round's checkpoint, read from the database (the log's own reads would count).
    const deadline = Date.now() + 10_000
    while ((await sql(limited, (q) => q<{ covered: boolean }>`SELECT coalesce(max(tree_size), 0) >= 260 AS covered FROM log_checkpoints`))[0]?.covered !== true) {
      if (Date.now() > deadline) throw new Error("no checkpoint covers the 260 queued entries within 10 s")
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    const statuses: Array<number> = []
    let refused: Awaited<ReturnType<typeof request>> | undefined
    for (let i = 0; i < 30 && refused === undefined; i++) {
      const reply = await request(limited, "GET", "/log/tile/0/000")
      statuses.push(reply.status)
      if (reply.status !== 200) refused = reply
    }
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(1)
    expectProblem(refused!, 429, "rate-limited")
    expect(refused!.headers.get("retry-after")).toMatch(/^\d+$/)
    expectProblem(await request(limited, "GET", "/log/key"), 429, "rate-limited")
  })

  // Readers reuse a partial tile for 500 ms and the checkpoint for 200 ms (src/log/TransparencyLog.ts); a read past
  // three quarters of that starts a read of the database ahead of the lapse. A change to the stored rows (here a
  // tampering, restored after) shows before the lapse only through that read.
  it("reads a partial tile again from the database ahead of its 500 ms lapse, and serves that read for its own 500 ms only", async () => {
    const { size: now } = await checkpointOf()
    const width = now % 256
    expect(width).toBeGreaterThan(0)
    const path = `/log/tile/0/${String(Math.floor(now / 256)).padStart(3, "0")}.p/${width}`
    const first = Math.floor(now / 256) * 256
    const [row] = await sql(server, (q) => q<{ leaf_hash: Uint8Array }>`SELECT leaf_hash FROM log_entries WHERE idx = ${first}`)
    const restore = () => sql(server, (q) => q`UPDATE log_entries SET leaf_hash = ${row!.leaf_hash} WHERE idx = ${first}`)
    const forged = randomBytes(32)
    let original = Buffer.alloc(0)
    try {
      const prepare = async () => {
        await restore()
        beyondPeak(600)
        const readFrom = server.clock.currentTimeMillisUnsafe()
        const read = await get(path, general)
        expect(read.status).toBe(200)
        const readTo = server.clock.currentTimeMillisUnsafe()
        original = read.bytes
        await sql(server, (q) => q`UPDATE log_entries SET leaf_hash = ${forged} WHERE idx = ${first}`)
        return [readFrom, readTo] as const
      }
      expect(await seenAhead(path, 380, 500, prepare, (bytes) => bytes.subarray(0, 32).equals(forged)), "the tile was read ahead").toBe(true)
    } finally {
      await restore()
    }
    expect(original.subarray(0, 32).equals(Buffer.from(row!.leaf_hash)), "the tile read before the change").toBe(true)
    // The read ahead started before now: 500 ms on it has lapsed, and the restored row is read.
    beyondPeak(500)
    expect((await get(path)).bytes.equals(original)).toBe(true)
  })

  it("reads the checkpoint again from the database ahead of its 200 ms lapse", async () => {
    const [stored] = await sql(server, (q) => q<{ tree_size: string; note: string }>`SELECT tree_size::text AS tree_size, note FROM log_checkpoints ORDER BY log_checkpoints.tree_size DESC LIMIT 1`)
    const restore = () => sql(server, (q) => q`UPDATE log_checkpoints SET note = ${stored!.note} WHERE tree_size = ${stored!.tree_size}`)
    const altered = `${stored!.note}\n`
    try {
      const prepare = async () => {
        await restore()
        beyondPeak(300)
        const readFrom = server.clock.currentTimeMillisUnsafe()
        expect((await get("/log/checkpoint", general)).status).toBe(200)
        const readTo = server.clock.currentTimeMillisUnsafe()
        await sql(server, (q) => q`UPDATE log_checkpoints SET note = ${altered} WHERE tree_size = ${stored!.tree_size}`)
        return [readFrom, readTo] as const
      }
      expect(await seenAhead("/log/checkpoint", 155, 200, prepare, (bytes) => bytes.toString("utf8") === altered), "the checkpoint was read ahead").toBe(true)
    } finally {
      await restore()
    }
    beyondPeak(300)
    expect((await get("/log/checkpoint")).bytes.toString("utf8")).toBe(stored!.note)
  })

  it("never serves a partial tile from memory beyond 200 ms after its width stopped being the latest checkpoint's, reads ahead or not", async () => {
    const { size: now, note } = await checkpointOf()
    const path = `/log/tile/0/${String(Math.floor(now / 256)).padStart(3, "0")}.p/${now % 256}`
    server.clock.advance(600)
    expect((await get(path, general)).status).toBe(200)
    // Another instance's checkpoint one entry larger (only its size matters here): the width is no longer current.
    const [{ root_hash: root }] = await sql(server, (q) => q<{ root_hash: Uint8Array }>`SELECT root_hash FROM log_checkpoints WHERE tree_size = ${now}`) as [{ root_hash: Uint8Array }]
    const storedAt = server.clock.currentTimeMillisUnsafe()
    await sql(server, (q) => q`INSERT INTO log_checkpoints (tree_size, root_hash, note, created_at) VALUES (${now + 1}, ${root}, ${note}, now())`)
    try {
      // Steady reads every 40 ms of the service's clock, each starting a read ahead when it may.
      for (let step = 1; step <= 15; step++) {
        server.clock.setTo(storedAt + step * 40)
        const before = server.clock.currentTimeMillisUnsafe()
        const answer = await get(path)
        if (before - storedAt >= 200) expect(answer.status, `${before - storedAt} ms after`).toBe(404)
      }
    } finally {
      await sql(server, (q) => q`DELETE FROM log_checkpoints WHERE tree_size = ${now + 1}`)
    }
    // The log grows past the removed row, so this instance serves its real checkpoint again.
    await createReceipts(server, writer, 2)
    await checkpointCovering(now + 2)
  })
})
