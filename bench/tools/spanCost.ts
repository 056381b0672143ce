// `npm run bench:tool -- spanCost [calls] [rounds]`: the CPU one `Effect.fn("…")` span adds to a service call, in
// process: the same trivial method plain and wrapped, in alternating rounds, medians of each (ns per call). The
// services rule in docs/ARCHITECTURE.md weighs it against a request's CPU to keep the per-request members span-free.
import { Effect } from "effect"

const [callsS = "200000", roundsS = "10"] = process.argv.slice(2)
const calls = Number(callsS), rounds = Number(roundsS)

const plain = (n: number) => Effect.succeed(n + 1)
const wrapped = Effect.fn("Bench.method")(plain)

const nsPerCall = (method: (n: number) => Effect.Effect<number>): number => {
  const program = Effect.gen(function*() {
    let sum = 0
    for (let i = 0; i < calls; i++) sum += yield* method(i)
    return sum
  })
  const before = process.cpuUsage()
  Effect.runSync(program)
  const used = process.cpuUsage(before)
  return (used.user + used.system) * 1000 / calls
}

nsPerCall(plain)
nsPerCall(wrapped)
const plainNs: Array<number> = [], wrappedNs: Array<number> = []
for (let r = 0; r < rounds; r++) {
  const order = r % 2 === 0 ? [plain, wrapped] : [wrapped, plain]
  for (const method of order) (method === plain ? plainNs : wrappedNs).push(nsPerCall(method))
}
const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
console.log(`plain ${median(plainNs).toFixed(0)} ns/call, with Effect.fn ${median(wrappedNs).toFixed(0)} ns/call: a span costs ${(median(wrappedNs) - median(plainNs)).toFixed(0)} ns`)
