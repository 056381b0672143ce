import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { ConfigProvider, Effect, Result } from "effect"
import { describe, expect, it } from "vitest"
import { privateKeyFromSeed } from "../../src/events/Signer.js"
import { cosignerFromPrivateKey } from "../../src/log/Cosignature.js"
import { verifierKeyOfSigner } from "../../src/log/Note.js"
import { DefaultWitnessIntervalMs } from "../../src/platform/Config.js"
import { witnessSettings } from "../../src/witness/Settings.js"
import { readConfig } from "../support/testConfig.js"

/** PV_LOG_WITNESSES / PV_LOG_WITNESS_QUORUM / PV_LOG_WITNESS_INTERVAL_MS (the service) and PV_WITNESS_* (`pv witness serve`), read from providers built here. */

const w1 = cosignerFromPrivateKey("w1.example/w", privateKeyFromSeed(Buffer.alloc(32, 61))).verifierKey
const w2 = cosignerFromPrivateKey("w2.example/w", privateKeyFromSeed(Buffer.alloc(32, 62))).verifierKey
const logKey = verifierKeyOfSigner("example.com/log", privateKeyFromSeed(Buffer.alloc(32, 63)))

const failureOf = (env: Record<string, string>) => {
  const read = readConfig(env)
  if (Result.isSuccess(read)) throw new Error(`expected ${JSON.stringify(env)} to be refused`)
  return String(read.failure)
}

describe("PV_LOG_WITNESSES and PV_LOG_WITNESS_QUORUM", () => {
  it("none by default: no witnesses, quorum 0", () => {
    const config = Result.getOrThrow(readConfig({}))
    expect([config.logWitnesses, config.logWitnessQuorum]).toEqual([[], 0])
  })

  it("parses <URL prefix>=<vkey> entries (a trailing slash dropped; the vkey's own `=` kept); the quorum defaults to all", () => {
    const config = Result.getOrThrow(readConfig({ PV_LOG_WITNESSES: `https://w1.example/sub/=${w1}, http://127.0.0.1:9000=${w2}` }))
    expect(config.logWitnesses).toEqual([{ url: "https://w1.example/sub", verifierKey: w1 }, { url: "http://127.0.0.1:9000", verifierKey: w2 }])
    expect(config.logWitnessQuorum).toBe(2)
    expect(Result.getOrThrow(readConfig({ PV_LOG_WITNESSES: `https://w1.example=${w1},https://w2.example=${w2}`, PV_LOG_WITNESS_QUORUM: "1" })).logWitnessQuorum).toBe(1)
  })

  it("refuses a log key (type 0x01) as a witness key, a missing URL, a quorum above the count or below 1, naming the variable", () => {
    expect(failureOf({ PV_LOG_WITNESSES: `https://w1.example=${logKey}` })).toContain("PV_LOG_WITNESSES")
    expect(failureOf({ PV_LOG_WITNESSES: w1 })).toContain("PV_LOG_WITNESSES")
    expect(failureOf({ PV_LOG_WITNESSES: `ftp://w1.example=${w1}` })).toContain("PV_LOG_WITNESSES")
    expect(failureOf({ PV_LOG_WITNESSES: `https://w1.example=${w1}`, PV_LOG_WITNESS_QUORUM: "2" })).toContain("PV_LOG_WITNESS_QUORUM")
    expect(failureOf({ PV_LOG_WITNESSES: `https://w1.example=${w1}`, PV_LOG_WITNESS_QUORUM: "-1" })).toContain("PV_LOG_WITNESS_QUORUM")
  })

  it("refuses a witness key listed twice (it would count twice toward the quorum)", () => {
    expect(failureOf({ PV_LOG_WITNESSES: `https://w1.example=${w1},https://other.example=${w1}` })).toMatch(/PV_LOG_WITNESSES lists the witness key w1\.example\/w\+[0-9a-f]{8} twice/)
  })

  it("PV_LOG_WITNESS_POLICY: a tlog-policy file stands for PV_LOG_WITNESSES and PV_LOG_WITNESS_QUORUM", () => {
    const dir = mkdtempSync(join(tmpdir(), "pv-policy-config-"))
    try {
      const file = (name: string, text: string) => {
        writeFileSync(join(dir, name), text)
        return join(dir, name)
      }
      const policy = file("ok.txt", `# ours\nlog ${logKey}\nwitness A ${w1} https://w1.example/sub/\nwitness B ${w2} http://127.0.0.1:9000\ngroup Q any A B\nquorum Q\n`)
      const config = Result.getOrThrow(readConfig({ PV_LOG_WITNESS_POLICY: policy }))
      expect(config.logWitnesses).toEqual([{ url: "https://w1.example/sub", verifierKey: w1 }, { url: "http://127.0.0.1:9000", verifierKey: w2 }])
      expect(config.logWitnessQuorum).toBe(1)
      expect(Result.getOrThrow(readConfig({ PV_LOG_WITNESS_POLICY: file("none.txt", `log ${logKey}\nquorum none\n`) })).logWitnesses).toEqual([])
      const refusals: Array<[Record<string, string>, RegExp]> = [
        [{ PV_LOG_WITNESS_POLICY: policy, PV_LOG_WITNESSES: `https://w1.example=${w1}` }, /not both/],
        [{ PV_LOG_WITNESS_POLICY: policy, PV_LOG_WITNESS_QUORUM: "2" }, /not both/],
        [{ PV_LOG_WITNESS_POLICY: join(dir, "missing.txt") }, /cannot be read/],
        [{ PV_LOG_WITNESS_POLICY: file("nourl.txt", `witness A ${w1}\nquorum A\n`) }, /witness A needs its submission URL/],
        [{ PV_LOG_WITNESS_POLICY: file("twice.txt", `witness A ${w1} https://a.example\nwitness A ${w2} https://b.example\nquorum A\n`) }, /line 2: the name A is already defined/],
        [{ PV_LOG_WITNESS_POLICY: file("one.txt", `witness A ${w1} https://a.example\nwitness B ${w2} https://b.example\nquorum A\n`) }, /one witness \(A\) of 2/]
      ]
      for (const [env, expected] of refusals) {
        const failure = failureOf(env)
        expect(failure).toContain("PV_LOG_WITNESS_POLICY")
        expect(failure).toMatch(expected)
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("PV_LOG_WITNESS_INTERVAL_MS: 1 s by default, 1 … 60000 ms accepted, anything else refused naming the variable", () => {
    expect(Result.getOrThrow(readConfig({})).logWitnessIntervalMs).toBe(DefaultWitnessIntervalMs)
    expect(DefaultWitnessIntervalMs).toBe(1_000)
    for (const ms of [1, 250, 60_000]) expect(Result.getOrThrow(readConfig({ PV_LOG_WITNESS_INTERVAL_MS: String(ms) })).logWitnessIntervalMs).toBe(ms)
    for (const bad of ["0", "-5", "60001", "1.5", "soon"]) expect(failureOf({ PV_LOG_WITNESS_INTERVAL_MS: bad })).toContain("PV_LOG_WITNESS_INTERVAL_MS")
  })
})

describe("pv witness serve settings", () => {
  const read = (env: Record<string, string>) => Effect.runSync(Effect.result(witnessSettings.parse(ConfigProvider.fromEnv({ env }))))

  it("needs at least one log verifier key; the name defaults to localhost/pv-witness", () => {
    const ok = read({ PV_WITNESS_LOGS: logKey })
    expect(Result.isSuccess(ok) && [ok.success.name, ok.success.logs]).toEqual(["localhost/pv-witness", [logKey]])
    for (const env of [{}, { PV_WITNESS_LOGS: "not a key" }, { PV_WITNESS_LOGS: w1 }, { PV_WITNESS_LOGS: logKey, PV_WITNESS_NAME: "has space" }]) {
      const refused = read(env)
      expect(Result.isFailure(refused) && String(refused.failure)).toMatch(/PV_WITNESS_(LOGS|NAME)/)
    }
  })
})
