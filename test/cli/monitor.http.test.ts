import { spawn } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { MonitorExitCodes } from "../../src/cli/LogMonitor.js"
import { privateKeyFromSeed } from "../../src/events/Signer.js"
import { signCheckpoint } from "../../src/log/Checkpoint.js"
import { appendSignatureLines, cosignerFromPrivateKey } from "../../src/log/Cosignature.js"
import { consistencyPath, hexOf, leafHash, rootOf, subtreeHashesOf } from "../../src/log/Merkle.js"
import { noteSignerFromPrivateKey, splitNote, verifierKeyOfSigner } from "../../src/log/Note.js"
import { childEnvironment } from "../support/childEnv.js"
import { compiledEntry } from "../support/spawned.js"

/**
 * `pv log monitor` as a child process against a fake log on loopback (docs/API.md, "Monitor"): a fork is
 * reported only when a proof fails to verify or two signed checkpoints disagree; a log that refuses the
 * connection, answers 503, hangs past --timeout or answers something malformed is UNREACHABLE, with its own
 * exit code, and the state file keeps the last checkpoint that passed.
 */

const root = fileURLToPath(new URL("../..", import.meta.url))
const origin = "fake.example/log"
const logKey = privateKeyFromSeed(Buffer.alloc(32, 77))
const signer = noteSignerFromPrivateKey(origin, logKey)
const verifierKey = verifierKeyOfSigner(origin, logKey)
const impostor = noteSignerFromPrivateKey(origin, privateKeyFromSeed(Buffer.alloc(32, 78)))
const witness = cosignerFromPrivateKey("fake.example/witness", privateKeyFromSeed(Buffer.alloc(32, 79)))
const leaves = Array.from({ length: 16 }, (_, i) => leafHash(Buffer.from(`entry ${i}`)))
const subtree = subtreeHashesOf(leaves)
const checkpointAt = (size: number, by = signer) => signCheckpoint({ origin, size, root: rootOf(size, subtree), extensions: [] }, by)
const cosigned = (note: string) => {
  const split = splitNote(note)
  if (!split.ok) throw new Error(split.detail)
  return appendSignatureLines(note, [witness.cosign(split.value.text, Math.floor(Date.now() / 1000) - 5)])
}

type Handler = (request: IncomingMessage, response: ServerResponse) => void

/** What the fake log answers, per path (the query string cut off); unlisted paths are 404. */
let routes: Record<string, Handler> = {}
let server: Server
let baseUrl: string
const scratch = mkdtempSync(join(tmpdir(), "pv-monitor-"))
const state = join(scratch, "state.json")
const hanging = new Set<ServerResponse>()

const text = (body: string, status = 200): Handler => (_request, response) => {
  response.writeHead(status, { "content-type": "text/plain; charset=utf-8" })
  response.end(body)
}
const json = (body: unknown, status = 200): Handler => (_request, response) => {
  response.writeHead(status, { "content-type": "application/json" })
  response.end(JSON.stringify(body))
}
/** Answers the consistency proof the query asks for, from `leaves` (optionally with one hash altered). */
const proofs = (alter = false): Handler => (request, response) => {
  const query = new URL(request.url!, "http://x").searchParams
  const path = consistencyPath(Number(query.get("first")), Number(query.get("second")), subtree).map(hexOf)
  if (alter && path.length > 0) path[0] = hexOf(randomBytes(32))
  json({ first: Number(query.get("first")), second: Number(query.get("second")), consistency_path: path })(request, response)
}
/** Sends the status line and headers, then never the body (or never anything). */
const hang = (headers: boolean): Handler => (_request, response) => {
  if (headers) response.writeHead(200, { "content-type": "text/plain; charset=utf-8" }).flushHeaders()
  hanging.add(response)
}

const monitor = (...args: Array<string>) =>
  new Promise<{ code: number | null; output: string; ms: number }>((resolve) => {
    const started = Date.now()
    const child = spawn(process.execPath, [compiledEntry("src/cli/main.ts"), "log", "monitor", ...args], { cwd: root, env: childEnvironment({}) })
    let output = ""
    child.stdout.on("data", (chunk) => (output += chunk))
    child.stderr.on("data", (chunk) => (output += chunk))
    child.once("close", (code) => resolve({ code, output, ms: Date.now() - started }))
  })

const run = (...extra: Array<string>) => monitor("--base-url", baseUrl, "--state", state, "--verifier-key", verifierKey, ...extra)

/** The monitor last accepted the checkpoint of `size` (in `file`, by default the state file of `run`). */
const seen = (size: number, file = state) => {
  const note = checkpointAt(size)
  writeFileSync(file, JSON.stringify({ verifier_key: verifierKey, checkpoint: note, checked_at: "" }))
  return note
}
const recorded = () => JSON.parse(readFileSync(state, "utf8")).checkpoint as string

beforeAll(async () => {
  server = createServer((request, response) => {
    const handler = routes[request.url!.split("?")[0]!]
    if (handler === undefined) text("not found\n", 404)(request, response)
    else handler(request, response)
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  if (address === null || typeof address === "string") throw new Error("no TCP address")
  baseUrl = `http://127.0.0.1:${address.port}`
})

beforeEach(() => {
  routes = { "/log/proof/consistency": proofs() }
})

afterAll(async () => {
  for (const response of hanging) response.destroy()
  server.closeAllConnections()
  await new Promise((resolve) => server.close(resolve))
  rmSync(scratch, { recursive: true, force: true })
})

describe("pv log monitor against a fake log", () => {
  it("--help documents the exit codes", async () => {
    const help = await monitor("--help")
    expect(help.code).toBe(0)
    for (const code of [2, 3, 4, 5, 6]) expect(help.output).toMatch(new RegExp(`^  ${code}  `, "m"))
    expect(help.output).toMatch(/--timeout SECONDS/)
  })

  it("accepts a consistent newer checkpoint (exit 0) and records it", async () => {
    seen(5)
    routes["/log/checkpoint"] = text(checkpointAt(11))
    const ok = await run()
    expect(ok.code, ok.output).toBe(MonitorExitCodes.ok)
    expect(ok.output).toMatch(/OK the tree of size 11 extends the tree of size 5/)
    expect(recorded()).toBe(checkpointAt(11))
  })

  it("a 503 is UNREACHABLE (exit 4), not a fork; the state keeps the last checkpoint that passed", async () => {
    const before = seen(5)
    routes["/log/checkpoint"] = text("busy\n", 503)
    const busy = await run()
    expect(busy.code, busy.output).toBe(MonitorExitCodes.unreachable)
    expect(busy.output).toMatch(/UNREACHABLE: GET \/log\/checkpoint answered 503/)
    expect(busy.output).not.toMatch(/FORK/)
    // The checkpoint answers but the proof the log owes does not.
    routes["/log/checkpoint"] = text(checkpointAt(9))
    routes["/log/proof/consistency"] = text("down for maintenance\n", 503)
    const noProof = await run()
    expect(noProof.code, noProof.output).toBe(MonitorExitCodes.unreachable)
    expect(noProof.output).toMatch(/UNREACHABLE: GET \/log\/proof\/consistency answered 503/)
    expect(recorded()).toBe(before)
  })

  it("a refused connection is UNREACHABLE (exit 4)", async () => {
    const closed = createServer()
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve))
    const port = (closed.address() as { port: number }).port
    await new Promise((resolve) => closed.close(resolve))
    seen(5)
    const refused = await monitor("--base-url", `http://127.0.0.1:${port}`, "--state", state, "--verifier-key", verifierKey)
    expect(refused.code, refused.output).toBe(MonitorExitCodes.unreachable)
    expect(refused.output).toMatch(/UNREACHABLE: GET http:\/\/127\.0\.0\.1:\d+\/log\/checkpoint/)
  })

  it("a log that hangs (before its headers, or after them) is UNREACHABLE within --timeout (exit 4)", async () => {
    // Three logs at once, each the fake log's paths under a prefix of its own (the monitor asks `${base}/log/…`)
    // with its own state file: the three runs wait out their --timeout side by side.
    const logs = [
      { prefix: "/hang-before-headers", checkpoint: hang(false), proof: proofs() },
      { prefix: "/hang-after-headers", checkpoint: hang(true), proof: proofs() },
      { prefix: "/hang-proof", checkpoint: text(checkpointAt(6)), proof: hang(false) }
    ]
    const [beforeHeaders, afterHeaders, proofLate] = await Promise.all(logs.map(({ prefix, checkpoint, proof }) => {
      const file = join(scratch, `state${prefix.replaceAll("/", "-")}.json`)
      seen(5, file)
      routes[`${prefix}/log/checkpoint`] = checkpoint
      routes[`${prefix}/log/proof/consistency`] = proof
      return monitor("--base-url", baseUrl + prefix, "--state", file, "--verifier-key", verifierKey, "--timeout", "1")
    }))
    for (const late of [beforeHeaders!, afterHeaders!]) {
      expect(late.code, late.output).toBe(MonitorExitCodes.unreachable)
      expect(late.output).toMatch(/no complete answer within 1000 ms/)
      // One second of time-out, plus a child process's start on a busy machine.
      expect(late.ms).toBeLessThan(15_000)
    }
    expect(proofLate!.code, proofLate!.output).toBe(MonitorExitCodes.unreachable)
  })

  it("an answer that is not a signed checkpoint or a proof is UNREACHABLE (exit 4)", async () => {
    seen(5)
    routes["/log/checkpoint"] = text("<html>maintenance</html>\n")
    const html = await run()
    expect(html.code, html.output).toBe(MonitorExitCodes.unreachable)
    expect(html.output).toMatch(/did not answer a signed checkpoint/)
    routes["/log/checkpoint"] = text(checkpointAt(9))
    routes["/log/proof/consistency"] = json({ consistency_path: "nope" })
    const malformed = await run()
    expect(malformed.code, malformed.output).toBe(MonitorExitCodes.unreachable)
    expect(malformed.output).toMatch(/consistency_path is not an array/)
    routes["/log/proof/consistency"] = text("not json")
    expect((await run()).code).toBe(MonitorExitCodes.unreachable)
  })

  it("a consistency proof that fails to verify is a FORK (exit 2)", async () => {
    const before = seen(5)
    routes["/log/checkpoint"] = text(checkpointAt(9))
    routes["/log/proof/consistency"] = proofs(true)
    const fork = await run()
    expect(fork.code, fork.output).toBe(MonitorExitCodes.fork)
    expect(fork.output).toMatch(/FORK: consistency_path does not prove the tree of size 9 extends the tree of size 5/)
    expect(recorded()).toBe(before)
  })

  it("two signed checkpoints of one size with different roots are a FORK (exit 2); a smaller tree is a ROLLBACK (exit 3)", async () => {
    seen(7)
    routes["/log/checkpoint"] = text(signCheckpoint({ origin, size: 7, root: randomBytes(32), extensions: [] }, signer))
    const fork = await run()
    expect(fork.code, fork.output).toBe(MonitorExitCodes.fork)
    expect(fork.output).toMatch(/FORK: two signed checkpoints of size 7 have different roots/)
    routes["/log/checkpoint"] = text(checkpointAt(4))
    const rollback = await run()
    expect(rollback.code, rollback.output).toBe(MonitorExitCodes.rollback)
    expect(rollback.output).toMatch(/ROLLBACK/)
  })

  it("a checkpoint not signed by the pinned key is BAD_SIGNATURE (exit 6)", async () => {
    seen(5)
    routes["/log/checkpoint"] = text(checkpointAt(9, impostor))
    const bad = await run()
    expect(bad.code, bad.output).toBe(MonitorExitCodes.bad_signature)
    expect(bad.output).toMatch(/BAD_SIGNATURE: the checkpoint does not verify/)
  })

  it("a witness's monitoring checkpoint the log cannot prove for lack of an answer is UNREACHABLE; a failing proof is a FORK", async () => {
    seen(5)
    const witnessPath = `/witness/${createHash("sha256").update(origin).digest("hex")}/checkpoint`
    routes["/log/checkpoint"] = text(checkpointAt(9))
    routes[witnessPath] = text(cosigned(checkpointAt(12)))
    const witnessArg = `${baseUrl}/witness=${witness.verifierKey}`
    // The log proves 5 → 9 to the monitor, then answers 503 when asked to prove 9 → 12 for the witness.
    let asked = 0
    routes["/log/proof/consistency"] = (request, response) => (++asked === 1 ? proofs()(request, response) : text("busy\n", 503)(request, response))
    const busy = await run("--witness", witnessArg, "--quorum", "1")
    // The log's own checkpoint is not cosigned: the pinned witness's quorum is checked on it first.
    expect(busy.code, busy.output).toBe(MonitorExitCodes.witness_quorum)
    routes["/log/checkpoint"] = text(cosigned(checkpointAt(9)))
    asked = 0
    const unanswered = await run("--witness", witnessArg)
    expect(unanswered.code, unanswered.output).toBe(MonitorExitCodes.unreachable)
    expect(unanswered.output).toMatch(/UNREACHABLE: .*answered 503.*asked to prove witness .*'s size 12 consistent with the log's 9/)
    expect(unanswered.output).not.toMatch(/FORK/)
    seen(5)
    routes["/log/proof/consistency"] = (request, response) => (new URL(request.url!, "http://x").searchParams.get("first") === "9" ? proofs(true) : proofs())(request, response)
    const forked = await run("--witness", witnessArg)
    expect(forked.code, forked.output).toBe(MonitorExitCodes.fork)
    expect(forked.output).toMatch(/FORK: what witness .* cosigned and what the log shows/)
  })

  it("--policy FILE: its log line pins the key, its quorum must be met (exit 5 when not), a malformed policy names the line", async () => {
    seen(5)
    const policy = join(scratch, "policy.txt")
    writeFileSync(policy, `log ${verifierKey} ${baseUrl}\nwitness W ${witness.verifierKey}\nquorum W\n`)
    routes["/log/checkpoint"] = text(checkpointAt(9))
    const unwitnessed = await monitor("--base-url", baseUrl, "--state", state, "--policy", policy)
    expect(unwitnessed.code, unwitnessed.output).toBe(MonitorExitCodes.witness_quorum)
    routes["/log/checkpoint"] = text(cosigned(checkpointAt(9)))
    const witnessed = await monitor("--base-url", baseUrl, "--state", state, "--policy", policy)
    expect(witnessed.code, witnessed.output).toBe(MonitorExitCodes.ok)
    expect(witnessed.output).toMatch(/1 of the policy's 1 witnesses cosigned the checkpoint \(W\)/)
    writeFileSync(policy, `log ${verifierKey}\nwitness W ${witness.verifierKey}\nwitness W ${witness.verifierKey}\nquorum W\n`)
    const malformed = await monitor("--base-url", baseUrl, "--state", state, "--policy", policy)
    expect(malformed.code, malformed.output).toBe(1)
    expect(malformed.output).toMatch(/the policy: line 3: the name W is already defined/)
  })
})
