import { createHash, createPublicKey, generateKeyPairSync } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { verifyEventChain } from "../../src/domain/EventVerify.js"
import { childEnvironment } from "../support/childEnv.js"
import { spawnEntry } from "../support/spawned.js"
import { createScratchDatabase, testDatabaseKind } from "../support/databases.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, putDetermination, request } from "../support/http.js"
import { startTestServer, testOperatorToken } from "../support/server.js"

/**
 * docs/OPERATIONS.md "Keys and credentials" and docs/API.md §7.9: on PostgreSQL the service refuses to start without
 * PV_EVENT_SIGNING_KEY (and PV_LOG_SIGNING_KEY), naming the variable, unless PV_DEV_EPHEMERAL_KEYS=true.
 * Rotation = configure a new key; old public keys stay published and old events keep verifying.
 * Embedded mode keeps a generated key in its data directory, so none of this applies to PGlite.
 */

const kind = testDatabaseKind()

const newPem = () => generateKeyPairSync("ed25519").privateKey.export({ format: "pem", type: "pkcs8" }).toString()

/** docs/API.md §7.9: kid = first 16 hex of SHA-256 of the raw 32-byte public key. */
const kidOfPem = (pem: string) => {
  const x = createPublicKey(pem).export({ format: "jwk" }).x as string
  return createHash("sha256").update(Buffer.from(x, "base64url")).digest("hex").slice(0, 16)
}

type Outcome =
  | { readonly kind: "listening"; readonly baseUrl: string; readonly output: () => string; readonly stop: () => Promise<number | null> }
  | { readonly kind: "exited"; readonly code: number | null; readonly signal: NodeJS.Signals | null; readonly output: string }

/**
 * Starts `src/main.ts` as its own OS process and resolves as soon as it either prints its "listening on"
 * banner or exits (a refused start), whichever comes first.
 */
const runServerProcess = async (env: Record<string, string>, dataDir: string): Promise<Outcome> => {
  // Nothing of this process's environment but what a process needs (support/childEnv.ts).
  const server = spawnEntry(["src/main.ts"], childEnvironment({
    PORT: "0", HOST: "127.0.0.1", PV_BANNER: "true", PV_DEMO_DATA: "false", PV_DATA_DIR: dataDir,
    PV_OPERATOR_TOKEN: testOperatorToken, ...env
  }))
  try {
    const [, baseUrl] = await server.waitFor(/listening on (http:\/\/[\d.]+:\d+)/)
    return { kind: "listening", baseUrl: baseUrl!, output: server.output, stop: () => server.stop(15_000) }
  } catch (error) {
    if (server.child.exitCode === null && server.child.signalCode === null) {
      server.child.kill("SIGKILL")
      throw error
    }
    const { code, signal } = await server.exited
    return { kind: "exited", code, signal, output: server.output() }
  }
}

describe.runIf(kind === "postgres")("signing keys on PostgreSQL: start-up", () => {
  let scratch: Awaited<ReturnType<typeof createScratchDatabase>>
  let dataDir: string
  beforeAll(async () => {
    scratch = await createScratchDatabase()
    dataDir = mkdtempSync(join(tmpdir(), "pv-signing-"))
  })
  afterAll(async () => {
    await scratch?.drop()
    if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true })
  })

  const expectRefused = async (env: Record<string, string>, variable: string) => {
    const outcome = await runServerProcess({ DATABASE_URL: scratch.url, ...env }, dataDir)
    if (outcome.kind === "listening") {
      const code = await outcome.stop()
      throw new Error(`the service started (exit ${code} after SIGTERM) instead of refusing:\n${outcome.output()}`)
    }
    expect(outcome.code, outcome.output).not.toBe(0)
    expect(outcome.code === null && outcome.signal === null, outcome.output).toBe(false)
    expect(outcome.output).toContain(variable)
    expect(outcome.output).not.toMatch(/listening on/)
  }

  it("refuses to start without PV_EVENT_SIGNING_KEY, naming it, and exits non-zero", async () => {
    await expectRefused({}, "PV_EVENT_SIGNING_KEY")
  })

  it("refuses without PV_EVENT_SIGNING_KEY even when the log key is configured", async () => {
    await expectRefused({ PV_LOG_SIGNING_KEY: newPem() }, "PV_EVENT_SIGNING_KEY")
  })

  it("refuses without PV_LOG_SIGNING_KEY, naming it, when only the event key is configured", async () => {
    await expectRefused({ PV_EVENT_SIGNING_KEY: newPem() }, "PV_LOG_SIGNING_KEY")
  })

  it("refuses without PV_WEBHOOK_SIGNING_KEY, naming it, when the event and log keys are configured", async () => {
    await expectRefused({ PV_EVENT_SIGNING_KEY: newPem(), PV_LOG_SIGNING_KEY: newPem() }, "PV_WEBHOOK_SIGNING_KEY")
  })

  it("refuses PV_DEV_EPHEMERAL_KEYS=false like an unset one", async () => {
    await expectRefused({ PV_DEV_EPHEMERAL_KEYS: "false" }, "PV_EVENT_SIGNING_KEY")
  })

  it("starts with PV_DEV_EPHEMERAL_KEYS=true and no keys, and serves", async () => {
    const outcome = await runServerProcess({ DATABASE_URL: scratch.url, PV_DEV_EPHEMERAL_KEYS: "true" }, dataDir)
    expect(outcome.kind, outcome.kind === "exited" ? outcome.output : "").toBe("listening")
    if (outcome.kind !== "listening") return
    try {
      expect((await fetch(`${outcome.baseUrl}/healthz`)).status).toBe(200)
      const keys = await (await fetch(`${outcome.baseUrl}/api/v1/events/keys`)).json() as { keys: Array<{ kid: string }> }
      expect(keys.keys.length).toBeGreaterThanOrEqual(1)
    } finally {
      expect(await outcome.stop()).toBe(0)
    }
  })

  it("starts with the keys configured and publishes the configured event key and webhook key", async () => {
    const pem = newPem()
    const webhookPem = newPem()
    const outcome = await runServerProcess({
      DATABASE_URL: scratch.url, PV_EVENT_SIGNING_KEY: pem, PV_LOG_SIGNING_KEY: newPem(), PV_WEBHOOK_SIGNING_KEY: webhookPem
    }, dataDir)
    expect(outcome.kind, outcome.kind === "exited" ? outcome.output : "").toBe("listening")
    if (outcome.kind !== "listening") return
    try {
      const keys = await (await fetch(`${outcome.baseUrl}/api/v1/events/keys`)).json() as { keys: Array<{ kid: string }> }
      expect(keys.keys.map((k) => k.kid)).toContain(kidOfPem(pem))
      const raw = Buffer.from(createPublicKey(webhookPem).export({ format: "jwk" }).x as string, "base64url")
      expect(await (await fetch(`${outcome.baseUrl}/api/v1/webhooks/signing-key`)).json())
        .toEqual({ public_key: "whpk_" + raw.toString("base64"), kid: kidOfPem(webhookPem) })
      // The PEMs (or any part of the private keys) never appear in the output.
      expect(outcome.output()).not.toContain(pem.split("\n")[1]!)
      expect(outcome.output()).not.toContain(webhookPem.split("\n")[1]!)
    } finally {
      expect(await outcome.stop()).toBe(0)
    }
  })
})

describe.runIf(kind === "postgres")("signing keys on PostgreSQL: rotation", () => {
  const id = "DET-V1-ROTATION-0001"
  const pemA = newPem()
  const pemB = newPem()
  const kidA = kidOfPem(pemA)
  const kidB = kidOfPem(pemB)
  let scratch: Awaited<ReturnType<typeof createScratchDatabase>>
  let readKey: string
  let page: any
  let jwks: any

  const withKey = (pem: string) =>
    startTestServer({
      databaseUrl: scratch.url,
      // devEphemeralKeys only covers keys that are not configured (the log key); the event key is pem.
      config: { eventSigningKey: Option.some(Redacted.make(pem)), devEphemeralKeys: true }
    })

  beforeAll(async () => {
    expect(kidA).not.toBe(kidB)
    scratch = await createScratchDatabase()
    const asOf = Date.now() - DAY_MS
    const a = await withKey(pemA)
    try {
      expect((await putDetermination(a, id, determinationBody(asOf))).status).toBe(201)
      const updated = await putDetermination(a, id, determinationBody(asOf, { tier: "T3" }))
      expect(updated.status, updated.text).toBe(200)
      readKey = (await createKey(a, ["trust:read"])).api_key
    } finally {
      await a.close()
    }
    const b = await withKey(pemB)
    try {
      const updated = await putDetermination(b, id, determinationBody(asOf, { tier: "T4" }))
      expect(updated.status, updated.text).toBe(200)
      const reply = await request(b, "GET", `/api/v1/events?public_id=${id}`, { bearer: readKey })
      expect(reply.status, reply.text).toBe(200)
      page = reply.body
      jwks = (await request(b, "GET", "/api/v1/events/keys")).body
    } finally {
      await b.close()
    }
  }, 180_000)
  afterAll(async () => {
    await scratch?.drop()
  })

  it("signs each event with the key configured when it was appended", () => {
    expect(page.events.map((e: any) => e.sequence)).toEqual([1, 2, 3])
    expect(page.events.map((e: any) => e.signature.kid)).toEqual([kidA, kidA, kidB])
  })

  it("publishes both the retired and the current key after the rotation", () => {
    const kids = jwks.keys.map((k: { kid: string }) => k.kid)
    expect(kids).toContain(kidA)
    expect(kids).toContain(kidB)
    for (const key of jwks.keys) expect(key).toMatchObject({ kty: "OKP", crv: "Ed25519", use: "sig", alg: "Ed25519" })
  })

  it("verifies the whole chain across the rotation with the project's verifier", () => {
    const verdict = verifyEventChain(page.events, jwks, { publicId: id, head: page.head })
    expect(verdict, JSON.stringify(verdict)).toMatchObject({ ok: true, count: 3 })
    if (verdict.ok) expect([...verdict.kids].sort()).toEqual([kidA, kidB].sort())
  })

  it("still verifies the events signed by the retired key, and only with it", () => {
    const signedByA = page.events.filter((e: any) => e.signature.kid === kidA)
    expect(signedByA).toHaveLength(2)
    expect(verifyEventChain(signedByA, jwks, { publicId: id })).toMatchObject({ ok: true, count: 2 })
    // Without A's public key, the first event cannot be vouched for: the JWKS really is what verifies it.
    const onlyB = { keys: jwks.keys.filter((k: { kid: string }) => k.kid !== kidA) }
    expect(verifyEventChain(page.events, onlyB, { publicId: id })).toMatchObject({ ok: false, sequence: 1, reason: "unknown-kid" })
  })
})

describe.runIf(kind !== "postgres")("signing keys on PostgreSQL (skipped on embedded PGlite)", () => {
  it.skip("only meaningful on PostgreSQL", () => undefined)
})
