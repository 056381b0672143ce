// `npm run bench:verify-events` (node --import tsx bench/verifyEvents.ts [--events 20000] [--seconds 1.5] [--rounds 3]):
// the event-chain verifier against its floor, in one process on one core:
//   (a) node:crypto Ed25519 verify/s of 32-byte messages with a prepared KeyObject (the floor: one verify per event),
//   (b) verifyEventChain events/s over a chain sealed by the service's own code,
//   (c) `pv verify-events --file` events/s in this process (file read, JSON parse, verify, summary; no process start).
// The three alternate for --rounds rounds and the best of each counts, so a noisy neighbour on a shared
// machine lowers a round, not the ratio. Rates are per second of this process's CPU time (user + system)
// and, beside them, per wall-clock second: on a machine shared with other work the CPU-time rates are the
// steadier ones. Prints a markdown table; `--json` prints the figures instead.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { randomBytes } from "node:crypto"
import { Effect } from "effect"
import { sealEvent } from "../src/domain/EventChain.js"
import { verifyEventChain } from "../src/domain/EventVerify.js"
import type { TrustEvent } from "../src/domain/TrustEvent.js"
import { verifyEventsCommand } from "../src/events/VerifyCommand.js"
import { privateKeyFromSeed, signerFromPrivateKey } from "../src/events/Signer.js"
import { ed25519VerifyRate, measureRate, type Rate } from "./lib.js"

const { values } = parseArgs({
  options: {
    events: { type: "string", default: "20000" },
    seconds: { type: "string", default: "1.5" },
    rounds: { type: "string", default: "3" },
    json: { type: "boolean", default: false }
  }
})
const length = Number(values.events)
const seconds = Number(values.seconds)
const rounds = Number(values.rounds)

const privateKey = privateKeyFromSeed(Buffer.alloc(32, 11))
const signer = signerFromPrivateKey(privateKey, "seed")
const jwks = { keys: [signer.jwk] }

// A chain shaped like the service's (bench/seed.ts): determination.updated events with a digest payload.
const publicId = "DET-V1-CHAIN-verify-bench"
const events: Array<TrustEvent> = []
const start = Date.UTC(2026, 0, 1)
for (let sequence = 1; sequence <= length; sequence++) {
  events.push(sealEvent({
    sequence,
    event_id: `evt_bench_verify_${String(sequence).padStart(7, "0")}`,
    public_id: publicId,
    type: "determination.updated",
    occurred_at: new Date(start + sequence * 1000).toISOString(),
    payload: {
      determination_id: "det_01JD6Q8Z7X5M3K9V2N4B6C8D0F",
      version: 1 + (sequence >> 4),
      determination_digest: `sha256:${randomBytes(32).toString("hex")}`,
      changed_fields: ["claims"],
      freshness_state: "CURRENT"
    },
    previousEventHash: events[sequence - 2]?.eventHash ?? null
  }, signer))
}
const head = { sequence: length, eventHash: events[length - 1]!.eventHash }
const dir = mkdtempSync(join(tmpdir(), "pv-verify-bench-"))
const file = join(dir, "chain.json")
writeFileSync(file, JSON.stringify({ public_id: publicId, events, next_after: null, head, jwks }))

// (b) checks the events as a consumer holds them: parsed from the feed's JSON.
const parsedEvents = JSON.parse(JSON.stringify(events)) as Array<unknown>
const measure = (work: () => number | Promise<number>) => measureRate(seconds, work)

const chainVerify = () =>
  measure(() => {
    const verdict = verifyEventChain(parsedEvents, jwks, { publicId, head })
    if (!verdict.ok) throw new Error(`the bench chain does not verify: ${JSON.stringify(verdict)}`)
    return verdict.count
  })

const log = console.log
// The whole command with its summary line silenced: read, parse, verify, describe.
const commandVerify = async () => {
  console.log = () => {}
  try {
    return await measure(async () => {
      const verdict = await Effect.runPromise(verifyEventsCommand({ file }))
      return verdict.ok ? verdict.count : 0
    })
  } finally {
    console.log = log
  }
}

const better = (a: Rate, b: Rate): Rate => ({ cpu: Math.max(a.cpu, b.cpu), wall: Math.max(a.wall, b.wall) })
let raw: Rate = { cpu: 0, wall: 0 }
let chain: Rate = { cpu: 0, wall: 0 }
let command: Rate = { cpu: 0, wall: 0 }
for (let round = 0; round < rounds; round++) {
  raw = better(raw, await ed25519VerifyRate(seconds))
  chain = better(chain, await chainVerify())
  command = better(command, await commandVerify())
}
rmSync(dir, { recursive: true, force: true })

const fmt = (n: number) => Math.round(n).toLocaleString("en-US")
const row = (name: string, rate: Rate) =>
  `| ${name} | ${fmt(rate.cpu)} | ${(rate.cpu / raw.cpu).toFixed(2)} | ${fmt(rate.wall)} | ${(rate.wall / raw.wall).toFixed(2)} |`
if (values.json) {
  log(JSON.stringify({ events: length, raw, chain, command }))
} else {
  log(`| ${length}-event chain, one core, best of ${rounds} × ${seconds} s | per CPU second | × (a) | per wall second | × (a) |`)
  log("|---|---:|---:|---:|---:|")
  log(row("(a) node:crypto Ed25519 verify, 32-byte message, prepared KeyObject", raw))
  log(row("(b) verifyEventChain (events)", chain))
  log(row("(c) pv verify-events --file, in process (events)", command))
}
