// `node --import tsx bench/witnessSteps.ts [--entries 1000000] [--n 5000]`: the pure steps of one add-checkpoint
// answer, timed alone on this process (µs each, CPU time): parsing the body, the log's Ed25519 signature, the
// consistency proof from a tree of --entries leaves, and the cosignature. What is left of a measured answer's CPU
// (bench/witness.ts) is HTTP, Effect, the database and logging.
import { parseArgs } from "node:util"
import { privateKeyFromSeed } from "../src/events/Signer.js"
import { signCheckpoint } from "../src/log/Checkpoint.js"
import { cosignerFromPrivateKey } from "../src/log/Cosignature.js"
import { consistencyPath, leafHash, rootOf, subtreeHashesOf } from "../src/log/Merkle.js"
import { noteSignerFromPrivateKey, parseVerifierKey, verifierKeyOfSigner } from "../src/log/Note.js"
import { checkLogSignature, decide, parseAddCheckpoint } from "../src/witness/AddCheckpoint.js"

const { values } = parseArgs({ options: { entries: { type: "string", default: "1000000" }, n: { type: "string", default: "5000" } } })
const entries = Number(values.entries)
const n = Number(values.n)
const tree = subtreeHashesOf(Array.from({ length: entries }, (_, i) => leafHash(Buffer.from(`entry ${i}`))))
const key = privateKeyFromSeed(Buffer.alloc(32, 1))
const signer = noteSignerFromPrivateKey("bench.example/log-0", key)
const parsedKey = parseVerifierKey(verifierKeyOfSigner(signer.name, key))
if (!parsedKey.ok) throw new Error("verifier key")
const trusted = new Map([[signer.name, [parsedKey.value]]])
const cosigner = cosignerFromPrivateKey("bench.example/witness", privateKeyFromSeed(Buffer.alloc(32, 2)))
const bodies = Array.from({ length: n }, (_, j) => {
  const old = entries - 7 * (n + 1) + 7 * j
  const size = old + 7
  const note = signCheckpoint({ origin: signer.name, size, root: rootOf(size, tree), extensions: [] }, signer)
  const proof = consistencyPath(old, size, tree)
  return { body: `old ${old}\n${proof.map((h) => `${Buffer.from(h).toString("base64")}\n`).join("")}\n${note}`, held: { size: old, root: rootOf(old, tree) }, proofLength: proof.length }
})

const time = <A>(name: string, f: (i: number) => A): Array<A> => {
  const out: Array<A> = []
  for (let i = 0; i < Math.min(500, n); i++) f(i)
  const cpu = process.cpuUsage()
  for (let i = 0; i < n; i++) out.push(f(i))
  const used = process.cpuUsage(cpu)
  console.log(`| ${name} | ${((used.user + used.system) / n).toFixed(1)} µs |`)
  return out
}
console.log(`consistency proofs of ${bodies[0]!.proofLength}–${Math.max(...bodies.map((b) => b.proofLength))} hashes, ${n} bodies`)
const requests = time("parse the body (old, proof lines, note)", (i) => {
  const r = parseAddCheckpoint(bodies[i]!.body)
  if (!r.ok) throw new Error(r.detail)
  return r.value
})
const signed = time("the log's signature: split, parse the checkpoint, Ed25519 verify", (i) => {
  const s = checkLogSignature(requests[i]!.note, trusted)
  if (s._tag !== "Signed") throw new Error(s._tag)
  return s.value
})
time("decide: the rules and the consistency proof", (i) => {
  const d = decide(requests[i]!, signed[i]!.checkpoint, bodies[i]!.held)
  if (d._tag !== "Cosign") throw new Error(d._tag)
})
time("cosign (Ed25519 sign, the line)", (i) => cosigner.cosign(signed[i]!.text, 1_790_000_000 + i))
