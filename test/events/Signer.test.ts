import { it } from "@effect/vitest"
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { generateKeyPairSync, verify } from "node:crypto"
import { Cause, Context, Effect, Exit, Layer, Option, Redacted } from "effect"
import { afterAll, describe, expect } from "vitest"
import { signingInputOf } from "../../src/domain/EventChain.js"
import { signingKeyFile, Signer, testSigningKeyPem } from "../../src/events/Signer.js"
import { keysFromJwks } from "../../src/domain/EventVerify.js"
import { AppConfig } from "../../src/platform/Config.js"
import { DatabaseMode } from "../../src/platform/Database.js"
import { testSigner } from "./chains.js"

const dirs: Array<string> = []
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })))
const freshDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "pv-signer-"))
  dirs.push(dir)
  return dir
}

/** A Signer built from a configuration read from an empty environment (every default) plus the given settings. */
const signerWith = (mode: Context.Service.Shape<typeof DatabaseMode>, eventSigningKey?: string, devEphemeralKeys = false) =>
  Signer.pipe(Effect.provide(Signer.layer.pipe(
    Layer.provide(AppConfig.layerFromEnv({}, {
      eventSigningKey: eventSigningKey === undefined ? Option.none() : Option.some(Redacted.make(eventSigningKey)),
      devEphemeralKeys
    })),
    Layer.provide(Layer.succeed(DatabaseMode, mode))
  )))

const hash = "ab".repeat(32)

describe("Signer", () => {
  it.effect("the Test layer is the fixed-seed key, and its signatures verify against its JWK", () =>
    Effect.gen(function*() {
      const signer = yield* Signer
      expect(signer.kid).toBe(testSigner.kid)
      const sig = signer.sign(signingInputOf(hash))
      expect(sig).toMatch(/^[A-Za-z0-9_-]{86}$/)
      expect(signer.sign(signingInputOf(hash))).toBe(sig)
      const key = keysFromJwks({ keys: [signer.jwk] }).get(signer.kid)!
      expect(verify(null, signingInputOf(hash), key, Buffer.from(sig, "base64url"))).toBe(true)
    }).pipe(Effect.provide(Signer.Test)))

  it.effect("PV_EVENT_SIGNING_KEY (PKCS#8 PEM, also with literal \\n) wins in either mode", () =>
    Effect.gen(function*() {
      const pem = testSigningKeyPem()
      const fromPostgres = yield* signerWith({ kind: "postgres" }, pem)
      expect(fromPostgres).toMatchObject({ kid: testSigner.kid, origin: "config" })
      const dir = freshDir()
      const flattened = yield* signerWith({ kind: "embedded", dataDir: dir }, pem.replace(/\n/g, "\\n"))
      expect(flattened).toMatchObject({ kid: testSigner.kid, origin: "config" })
      expect(() => statSync(signingKeyFile(dir))).toThrow()
    }))

  it.effect("a PEM that is not an Ed25519 private key stops the start", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(signerWith({ kind: "postgres" }, "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n"))
      expect(Exit.isFailure(exit) && String(exit.cause)).toContain("PV_EVENT_SIGNING_KEY")
      const ecKey = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ format: "pem", type: "pkcs8" }).toString()
      const wrongType = yield* Effect.exit(signerWith({ kind: "postgres" }, ecKey))
      expect(Exit.isFailure(wrongType) && String(wrongType.cause)).toContain("must be Ed25519")
    }))

  it.effect("embedded mode generates a key once, mode 0600, and keeps it", () =>
    Effect.gen(function*() {
      const dir = freshDir()
      const first = yield* signerWith({ kind: "embedded", dataDir: dir })
      const file = signingKeyFile(dir)
      expect(statSync(file).mode & 0o777).toBe(0o600)
      expect(readFileSync(file, "utf8")).toContain("BEGIN PRIVATE KEY")
      const second = yield* signerWith({ kind: "embedded", dataDir: dir })
      expect(first.origin).toBe("data-dir")
      expect(second.kid).toBe(first.kid)
      const other = yield* signerWith({ kind: "embedded", dataDir: freshDir() })
      expect(other.kid).not.toBe(first.kid)
    }))

  it.effect("DATABASE_URL mode without a key refuses to start, naming PV_EVENT_SIGNING_KEY", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(signerWith({ kind: "postgres" }))
      expect(Exit.isFailure(exit)).toBe(true)
      if (Exit.isFailure(exit)) expect(Cause.pretty(exit.cause)).toContain("PV_EVENT_SIGNING_KEY is not set")
    }))

  it.effect("with PV_DEV_EPHEMERAL_KEYS=true, DATABASE_URL mode signs with an ephemeral key per process", () =>
    Effect.gen(function*() {
      const a = yield* signerWith({ kind: "postgres" }, undefined, true)
      const b = yield* signerWith({ kind: "postgres" }, undefined, true)
      expect(a.origin).toBe("ephemeral")
      expect(a.kid).not.toBe(b.kid)
    }))
})
