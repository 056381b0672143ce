import { randomBytes } from "node:crypto"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { testSigningKeyPem } from "../../src/events/Signer.js"
import { testLogSigningKeyPem } from "../../src/log/LogKey.js"
import { testWebhookSigningKeyPem } from "../../src/webhooks/WebhookKey.js"
import { createScratchDatabase, testDatabaseKind } from "../support/databases.js"
import { spawnEntry } from "../support/spawned.js"

/**
 * The environment defaults (docs/OPERATIONS.md "Settings", docs/API.md §14), on the real entry point: `src/main.ts`
 * started as a child process with an environment written here in full (nothing from the developer's).
 * Embedded mode with an empty database loads the demo data and generates an operator token (printed once,
 * kept in the data directory with mode 0600); DATABASE_URL mode never invents a credential.
 */

const kind = testDatabaseKind()

/** The demo determinations the README promises, written out here rather than read from the service. */
const demoIds = [
  "DET-V1-ACME-ROBOTICS-0001", "DET-V1-NORTHWIND-0002", "DET-V1-GLOBEX-0003", "DET-V1-INITECH-0004",
  "QUAL-V1-ACME-ROBOTICS-ISO27001", "QUAL-V1-NORTHWIND-SOC2"
]

interface Started {
  readonly baseUrl: string
  /** Everything the process printed so far (stdout and stderr). */
  readonly output: () => string
  readonly stop: () => Promise<void>
}

/**
 * Starts `src/main.ts` with exactly `env` (plus PORT=0 and HOST) and waits for the whole banner, or rejects
 * with the output if the process exits first.
 */
const startMain = async (env: Record<string, string>): Promise<Started> => {
  const home = mkdtempSync(join(tmpdir(), "pv-defaults-home-"))
  const server = spawnEntry(["src/main.ts"], { HOME: home, TMPDIR: tmpdir(), PORT: "0", HOST: "127.0.0.1", ...env })
  void server.exited.then(() => rmSync(home, { recursive: true, force: true }))
  // Stopped at the file's end whatever happens here: a test that times out while this still waits (the banner's
  // wait outlasts a test's time-out) would otherwise leave the process running after the run.
  cleanups.push(() => server.stop(2_000))
  try {
    // The banner is one write; wait for its last line so every line is there.
    const [, baseUrl] = await server.waitFor(/listening on (http:\/\/[\d.]+:\d+)[\s\S]*curl -s -X POST/)
    return { baseUrl: baseUrl!, output: server.output, stop: async () => void (await server.stop(10_000)) }
  } catch (error) {
    server.child.kill("SIGKILL")
    throw error
  }
}

/** Runs `src/main.ts` with exactly `env` and expects it to refuse to start: its exit code and output. */
const refusedStart = async (env: Record<string, string>): Promise<{ readonly code: number | null; readonly output: string }> => {
  const started = spawnEntry(["src/main.ts"], { HOME: tmpdir(), TMPDIR: tmpdir(), PORT: "0", HOST: "127.0.0.1", ...env })
  const timer = setTimeout(() => started.child.kill("SIGKILL"), 60_000)
  const { code, signal } = await started.exited
  clearTimeout(timer)
  if (signal === "SIGKILL") throw new Error(`expected the start to be refused, but the process kept running:\n${started.output()}`)
  return { code, output: started.output() }
}

const get = async (baseUrl: string, path: string, bearer?: string) => {
  const response = await fetch(baseUrl + path, { headers: bearer === undefined ? {} : { authorization: `Bearer ${bearer}` } })
  const text = await response.text()
  return { status: response.status, body: text.length > 0 ? JSON.parse(text) : undefined }
}

const postKey = async (baseUrl: string, bearer: string | undefined) => {
  const response = await fetch(baseUrl + "/api/v1/api-keys", {
    method: "POST",
    headers: { "content-type": "application/json", ...(bearer === undefined ? {} : { authorization: `Bearer ${bearer}` }) },
    body: JSON.stringify({ tenant_id: "demo", name: "defaults", scopes: ["trust:read"] })
  })
  await response.text()
  return response.status
}

const cleanups: Array<() => Promise<unknown> | void> = []
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup()
})
const dataDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "pv-defaults-"))
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

describe.runIf(kind === "pglite")("embedded defaults (no DATABASE_URL, no PV_OPERATOR_TOKEN)", () => {
  it("loads the demo data and generates an operator token, printed once and kept with mode 0600", async () => {
    const dir = dataDir()
    const tokenFile = join(dir, "operator-token")
    const first = await startMain({ PV_DATA_DIR: dir })
    const banner = first.output()
    expect(banner).toMatch(/demo data: +loaded 6 determinations/)
    expect(banner).toContain(`operator token: ${tokenFile} (generated now)`)
    const printed = /operator token value \(shown once\): (\S+)/.exec(banner)?.[1]
    expect(printed).toBeDefined()
    expect(existsSync(tokenFile)).toBe(true)
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600)
    const token = readFileSync(tokenFile, "utf8").trim()
    expect(token).toBe(printed)
    expect(token.length).toBeGreaterThanOrEqual(32)

    // The demo determinations are served, and the generated token is the operator credential.
    const heads = new Map<string, number>()
    for (const publicId of demoIds) {
      const reply = await get(first.baseUrl, `/api/v1/trust/${publicId}/human`)
      expect(reply.status, publicId).toBe(200)
      expect(reply.body.schema).toBe("pv.machine-trust.v1")
      heads.set(publicId, reply.body.integrity.event_head.sequence)
    }
    expect(await postKey(first.baseUrl, token)).toBe(201)
    expect(await postKey(first.baseUrl, undefined)).toBe(401)
    expect(await postKey(first.baseUrl, `pv_op_${randomBytes(32).toString("base64url")}`)).toBe(401)
    await first.stop()

    // A restart on the same directory: the same token, not printed again, and the demo data not loaded twice.
    const second = await startMain({ PV_DATA_DIR: dir })
    expect(second.output()).not.toContain("shown once")
    expect(second.output()).not.toContain(token)
    expect(second.output()).not.toContain("generated now")
    expect(second.output()).not.toMatch(/demo data: +loaded/)
    expect(readFileSync(tokenFile, "utf8").trim()).toBe(token)
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600)
    expect(await postKey(second.baseUrl, token)).toBe(201)
    for (const publicId of demoIds) {
      const reply = await get(second.baseUrl, `/api/v1/trust/${publicId}/human`)
      expect(reply.status, publicId).toBe(200)
      expect(reply.body.integrity.event_head.sequence, publicId).toBe(heads.get(publicId))
    }
    await second.stop()
    // A first start of the embedded service (its migrations, the demo data) and a restart: 9 s alone, 43–60 s and once past
    // the default 60 s under `npm test`, where it runs at nice +10 beside the fault groups (test/support/faultsDone.ts).
  }, 180_000)

  it("refuses to start with a PV_OPERATOR_TOKEN shorter than 32 characters, naming the variable", async () => {
    const dir = dataDir()
    const { code, output } = await refusedStart({ PV_DATA_DIR: dir, PV_OPERATOR_TOKEN: "x".repeat(31) })
    expect(code).not.toBe(0)
    expect(output).toContain("PV_OPERATOR_TOKEN")
    expect(output).not.toContain("listening on")
    expect(readdirSync(dir)).not.toContain("operator-token")
  })
})

describe.runIf(kind === "postgres")("DATABASE_URL mode without PV_OPERATOR_TOKEN", () => {
  it("never invents a credential: operator endpoints answer 401, nothing is written, no demo data", async () => {
    const scratch = await createScratchDatabase()
    cleanups.push(() => scratch.drop())
    const dir = dataDir()
    const server = await startMain({
      DATABASE_URL: scratch.url,
      PV_DATA_DIR: dir,
      PV_EVENT_SIGNING_KEY: testSigningKeyPem(),
      PV_LOG_SIGNING_KEY: testLogSigningKeyPem(),
      PV_WEBHOOK_SIGNING_KEY: testWebhookSigningKeyPem()
    })
    expect(server.output()).toContain("operator token: not configured")
    expect(server.output()).not.toContain("shown once")
    expect(readdirSync(dir)).not.toContain("operator-token")
    for (const bearer of [undefined, "", `pv_op_${randomBytes(32).toString("base64url")}`, randomBytes(48).toString("hex")]) {
      expect(await postKey(server.baseUrl, bearer), JSON.stringify(bearer)).toBe(401)
      expect((await get(server.baseUrl, "/api/v1/api-keys", bearer)).status).toBe(401)
    }
    // The demo data is for an empty embedded database only.
    expect((await get(server.baseUrl, `/api/v1/trust/${demoIds[0]}/human`)).status).toBe(404)
    await server.stop()
    expect(readdirSync(dir)).not.toContain("operator-token")
  })
})

/**
 * The compiled service is bundled (scripts/bundleService.ts): what it reads beside its own modules (the page's files
 * and bundles, and the policy, read at start: a start without them fails) and from effect's files (the /docs script,
 * on the first request) must still be found from the bundle's chunks.
 */
describe.runIf(kind === "postgres")("the compiled, bundled service's files", () => {
  it("starts (the policy and the page's files found) and serves the page, its two bundles and /docs", async () => {
    const scratch = await createScratchDatabase()
    cleanups.push(() => scratch.drop())
    const server = await startMain({
      DATABASE_URL: scratch.url,
      PV_DATA_DIR: dataDir(),
      PV_EVENT_SIGNING_KEY: testSigningKeyPem(),
      PV_LOG_SIGNING_KEY: testLogSigningKeyPem(),
      PV_WEBHOOK_SIGNING_KEY: testWebhookSigningKeyPem()
    })
    for (const [path, type] of [["/", "text/html"], ["/web/app.js", "javascript"], ["/web/verify.js", "javascript"], ["/web/style.css", "text/css"]] as const) {
      const response = await fetch(server.baseUrl + path)
      const body = await response.text()
      expect(response.status, path).toBe(200)
      expect(response.headers.get("content-type"), path).toContain(type)
      expect(body.length, path).toBeGreaterThan(100)
    }
    const docs = await fetch(`${server.baseUrl}/docs`)
    const page = await docs.text()
    expect(docs.status).toBe(200)
    expect(docs.headers.get("content-type")).toContain("text/html")
    // The Scalar reference's script, read from effect's own file: megabytes, not an error page.
    expect(page.length).toBeGreaterThan(1_000_000)
    await server.stop()
  })
})
