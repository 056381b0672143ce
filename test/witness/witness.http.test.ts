import { createHash } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { privateKeyFromSeed } from "../../src/events/Signer.js"
import { formatCheckpoint, signCheckpoint } from "../../src/log/Checkpoint.js"
import { parseCosignerKey, requireQuorum } from "../../src/log/Cosignature.js"
import { consistencyPath, leafHash, rootOf, subtreeHashesOf, type Hash } from "../../src/log/Merkle.js"
import { noteSignerFromPrivateKey, signNote, verifierKeyOfSigner, type NoteSigner } from "../../src/log/Note.js"
import { startTestWitness, type TestWitness } from "../support/witness.js"

/**
 * `pv witness serve` over HTTP (C2SP tlog-witness add-checkpoint), on each database: every status rule,
 * the cosignature it answers, its key and monitoring endpoints, and concurrent submissions never
 * rolling the stored size back.
 */

const logA = noteSignerFromPrivateKey("example.com/log-a", privateKeyFromSeed(Buffer.alloc(32, 21)))
const logB = noteSignerFromPrivateKey("example.com/log-b", privateKeyFromSeed(Buffer.alloc(32, 22)))
const logC = noteSignerFromPrivateKey("example.com/log-c", privateKeyFromSeed(Buffer.alloc(32, 23)))
const impostorA = noteSignerFromPrivateKey("example.com/log-a", privateKeyFromSeed(Buffer.alloc(32, 24)))
const unknownLog = noteSignerFromPrivateKey("example.com/nobody", privateKeyFromSeed(Buffer.alloc(32, 25)))
const vkeyOf = (seed: number, name: string) => verifierKeyOfSigner(name, privateKeyFromSeed(Buffer.alloc(32, seed)))

/** One tree of 300 leaves; a checkpoint of any size up to it, and proofs between sizes. */
const leaves: Array<Hash> = Array.from({ length: 300 }, (_, i) => leafHash(Buffer.from(`entry ${i}`)))
const subtree = subtreeHashesOf(leaves)
const forkedLeaves = leaves.map((leaf, i) => (i === 7 ? leafHash(Buffer.from("forked")) : leaf))
const forkedSubtree = subtreeHashesOf(forkedLeaves)

const note = (signer: NoteSigner, size: number, tree = subtree) =>
  signCheckpoint({ origin: signer.name, size, root: rootOf(size, tree), extensions: [] }, signer)
const bodyOf = (old: number, proof: ReadonlyArray<Hash>, checkpoint: string) =>
  `old ${old}\n${proof.map((h) => `${Buffer.from(h).toString("base64")}\n`).join("")}\n${checkpoint}`
const proofOf = (old: number, size: number, tree = subtree) => consistencyPath(old, size, tree)

let witness: TestWitness

const add = async (body: string) => {
  const response = await fetch(`${witness.baseUrl}/add-checkpoint`, { method: "POST", body, headers: { "content-type": "text/plain" } })
  return { status: response.status, contentType: response.headers.get("content-type") ?? "", text: await response.text() }
}

const expectRefusal = (reply: { status: number; contentType: string; text: string }, status: number) => {
  expect([reply.status, reply.text]).toEqual([status, expect.any(String)])
  expect(reply.contentType).toMatch(/^application\/problem\+json/)
  expect(JSON.parse(reply.text)).toMatchObject({ status })
}

const expectConflict = (reply: { status: number; contentType: string; text: string }, held: number) => {
  expect([reply.status, reply.contentType, reply.text]).toEqual([409, "text/x.tlog.size", `${held}\n`])
}

beforeAll(async () => {
  witness = await startTestWitness([logA, logB, logC].map((s, i) => vkeyOf(21 + i, s.name)))
}, 120_000)
afterAll(async () => {
  await witness?.close()
})

describe("tlog-witness add-checkpoint", () => {
  it("GET /witness/key names the witness and its cosignature/v1 verifier key (type 0x04)", async () => {
    const response = await fetch(`${witness.baseUrl}/witness/key`)
    const key = await response.json() as { name: string; verifier_key: string }
    expect(response.status).toBe(200)
    expect(key.name).toBe("witness.test/w1")
    const parsed = parseCosignerKey(key.verifier_key)
    expect(parsed.ok && parsed.value.name).toBe("witness.test/w1")
    expect(Buffer.from(key.verifier_key.split("+")[2]!, "base64")[0]).toBe(4)
  })

  it("cosigns a first checkpoint from old 0 with one cosignature/v1 line that verifies", async () => {
    const checkpoint = note(logA, 5)
    const reply = await add(bodyOf(0, [], checkpoint))
    expect(reply.status).toBe(200)
    expect(reply.text).toMatch(/^— witness\.test\/w1 [A-Za-z0-9+/=]+\n$/)
    const verifier = parseCosignerKey(witness.verifierKey)
    if (!verifier.ok) throw new Error(verifier.detail)
    const now = Math.floor(witness.clock.currentTimeMillisUnsafe() / 1000)
    expect(requireQuorum(checkpoint + reply.text, [verifier.value], 1, now).ok).toBe(true)
  })

  it("404 for an origin it does not witness", async () => {
    expectRefusal(await add(bodyOf(0, [], note(unknownLog, 3))), 404)
  })

  it("403 without a trusted signature, and when a line naming the trusted key does not verify", async () => {
    expectRefusal(await add(bodyOf(5, proofOf(5, 9), note(impostorA, 9))), 403)
    const good = note(logA, 9)
    const text = formatCheckpoint({ origin: logA.name, size: 9, root: rootOf(9, subtree), extensions: [] })
    const sigLine = good.slice(text.length + 1)
    const bytes = Buffer.from(sigLine.slice(`— ${logA.name} `.length, -1), "base64")
    bytes[10] = bytes[10]! ^ 1
    const broken = `${text}\n${sigLine}— ${logA.name} ${bytes.toString("base64")}\n`
    expectRefusal(await add(bodyOf(5, proofOf(5, 9), broken)), 403)
  })

  it("ignores signatures by keys it does not know", async () => {
    const withStranger = signNote(formatCheckpoint({ origin: logA.name, size: 9, root: rootOf(9, subtree), extensions: [] }), [unknownLog, logA])
    const reply = await add(bodyOf(5, proofOf(5, 9), withStranger))
    expect(reply.status).toBe(200)
  })

  it("400 for an old size above the checkpoint size, malformed bodies, and more than 63 proof lines", async () => {
    expectRefusal(await add(bodyOf(12, [], note(logA, 10))), 400)
    expectRefusal(await add("old 09\n\n" + note(logA, 10)), 400)
    expectRefusal(await add("new 9\n\n" + note(logA, 10)), 400)
    expectRefusal(await add("old 9\n" + note(logA, 10)), 400)
    expectRefusal(await add("old 9\nnot base64\n\n" + note(logA, 10)), 400)
    expectRefusal(await add(bodyOf(9, Array.from({ length: 64 }, () => leaves[0]!), note(logA, 10))), 400)
    expectRefusal(await add(bodyOf(9, [], "example.com/log-a\n10\n")), 400)
  })

  it("409 text/x.tlog.size with the held size when old differs; then the retry with that size succeeds", async () => {
    expectConflict(await add(bodyOf(0, [], note(logA, 20))), 9)
    expectConflict(await add(bodyOf(5, proofOf(5, 20), note(logA, 20))), 9)
    expect((await add(bodyOf(9, proofOf(9, 20), note(logA, 20)))).status).toBe(200)
  })

  it("409 with the held size for the same size with another root (a fork at the size it cosigned)", async () => {
    expectConflict(await add(bodyOf(20, [], note(logA, 20, forkedSubtree))), 20)
    // The same checkpoint again is cosigned again.
    expect((await add(bodyOf(20, [], note(logA, 20)))).status).toBe(200)
  })

  it("422 for a proof that does not verify (a larger, forked tree), a proof from 0, and size 0 with another root", async () => {
    expectRefusal(await add(bodyOf(20, proofOf(20, 40, forkedSubtree), note(logA, 40, forkedSubtree))), 422)
    expectRefusal(await add(bodyOf(20, proofOf(20, 41), note(logA, 40))), 422)
    expectRefusal(await add(bodyOf(20, [], note(logA, 40))), 422)
    expectRefusal(await add(bodyOf(0, [leaves[0]!], note(logB, 4))), 422)
    expectRefusal(await add(bodyOf(0, [], signCheckpoint({ origin: logB.name, size: 0, root: leaves[1]!, extensions: [] }, logB))), 422)
    expect((await add(bodyOf(0, [], note(logB, 0)))).status).toBe(200)
    // Nothing refused was stored: the held size is still 20.
    expectConflict(await add(bodyOf(0, [], note(logA, 50))), 20)
  })

  it("serves the latest cosigned checkpoint to monitors at /<sha256(origin)>/checkpoint", async () => {
    const hash = createHash("sha256").update(logA.name).digest("hex")
    const response = await fetch(`${witness.baseUrl}/${hash}/checkpoint`)
    const text = await response.text()
    expect(response.status).toBe(200)
    expect(text.startsWith(formatCheckpoint({ origin: logA.name, size: 20, root: rootOf(20, subtree), extensions: [] }) + "\n")).toBe(true)
    const verifier = parseCosignerKey(witness.verifierKey)
    if (!verifier.ok) throw new Error(verifier.detail)
    expect(requireQuorum(text, [verifier.value], 1, Math.floor(witness.clock.currentTimeMillisUnsafe() / 1000)).ok).toBe(true)
    const unknown = createHash("sha256").update(unknownLog.name).digest("hex")
    expect((await fetch(`${witness.baseUrl}/${unknown}/checkpoint`)).status).toBe(404)
    expect((await fetch(`${witness.baseUrl}/${createHash("sha256").update(logC.name).digest("hex")}/checkpoint`)).status).toBe(404)
  })

  it("concurrent submissions of N and N+K never roll the stored size back: one wins, the rest get 409", async () => {
    let held = 0
    for (let round = 0; round < 8; round++) {
      const sizes = [held + 1, held + 3, held + 7, held + 12, held + 20]
      const replies = await Promise.all(sizes.map((size) => add(bodyOf(held, proofOf(held, size), note(logC, size)))))
      const won = replies.flatMap((reply, i) => (reply.status === 200 ? [sizes[i]!] : []))
      expect(won).toHaveLength(1)
      for (const reply of replies) if (reply.status !== 200) expectConflict(reply, won[0]!)
      expect(won[0]!).toBeGreaterThan(held)
      held = won[0]!
    }
    // Stale retries from any earlier size are refused with the held size.
    expectConflict(await add(bodyOf(1, proofOf(1, 2), note(logC, 2))), held)
  })
  it("concurrent submissions for several logs, stored together, each keep their own rule: one winner per log, the others 409 with its size", async () => {
    const logs = [logA, logB]
    const heldOf = async (signer: NoteSigner) => {
      const response = await fetch(`${witness.baseUrl}/${createHash("sha256").update(signer.name).digest("hex")}/checkpoint`)
      return response.status === 404 ? 0 : Number((await response.text()).split("\n")[1])
    }
    const held = new Map<NoteSigner, number>()
    for (const signer of logs) held.set(signer, await heldOf(signer))
    for (let round = 0; round < 6; round++) {
      // Per log, one submission from the held size and two more of other sizes, all in flight at once.
      const submissions = logs.flatMap((signer) => {
        const from = held.get(signer)!
        return [from + 2 + round, from + 5 + round, from + 9 + round].map((size) => ({ signer, size, from }))
      })
      const replies = await Promise.all(submissions.map(({ signer, size, from }) => add(bodyOf(from, proofOf(from, size), note(signer, size)))))
      for (const signer of logs) {
        const mine = submissions.flatMap((s, i) => (s.signer === signer ? [{ ...s, reply: replies[i]! }] : []))
        const won = mine.filter((m) => m.reply.status === 200)
        expect(won).toHaveLength(1)
        for (const m of mine) if (m.reply.status !== 200) expectConflict(m.reply, won[0]!.size)
        held.set(signer, won[0]!.size)
        expect(await heldOf(signer)).toBe(won[0]!.size)
      }
    }
  })

  it("refusals before the rules: 413 over 64 KiB (closing the connection), 400 for a body that is not UTF-8, the request id as instance; counted in /metrics", async () => {
    const big = await fetch(`${witness.baseUrl}/add-checkpoint`, { method: "POST", body: "old 0\n" + "A".repeat(70 * 1024) })
    expect(big.status).toBe(413)
    expect(big.headers.get("connection")).toBe("close")
    expect(await big.json()).toMatchObject({ status: 413 })
    const latin1 = await fetch(`${witness.baseUrl}/add-checkpoint`, {
      method: "POST",
      body: Buffer.concat([Buffer.from("old 0\n\n"), Buffer.from([0xff, 0xfe]), Buffer.from(note(logA, 60))]),
      headers: { "x-request-id": "witness-test-1" }
    })
    expect(latin1.status).toBe(400)
    expect(latin1.headers.get("x-request-id")).toBe("witness-test-1")
    expect(latin1.headers.get("content-type")).toMatch(/^application\/problem\+json/)
    expect(await latin1.json()).toMatchObject({ status: 400, instance: "urn:pv:request:witness-test-1" })
    // Another method on the path is the router's (no such route), as before.
    expect((await fetch(`${witness.baseUrl}/add-checkpoint`)).status).toBe(404)
    const metrics = await (await fetch(`${witness.baseUrl}/metrics`)).text()
    expect(metrics).toMatch(/pv_http_requests_total\{[^}]*route="\/add-checkpoint"[^}]*status="413"[^}]*\} 1/)
    expect(metrics).toMatch(/pv_witness_add_checkpoint_total\{[^}]*status="409"[^}]*\} [1-9]/)
  })

  it("GET /healthz and /readyz answer; unknown routes are problem+json 404", async () => {
    expect((await fetch(`${witness.baseUrl}/healthz`)).status).toBe(200)
    expect((await fetch(`${witness.baseUrl}/readyz`)).status).toBe(200)
    const unknown = await fetch(`${witness.baseUrl}/nothing-here`)
    expect(unknown.status).toBe(404)
    expect(unknown.headers.get("content-type")).toMatch(/problem\+json/)
  })
})
