import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import { demoDeterminations } from "../../src/demo/DemoData.js"
import { createKey, putDetermination, request } from "../support/http.js"
import { isolatedConfig } from "../support/testConfig.js"
import { startTestServer, type TestServer } from "../support/server.js"
import { packageSpecifier, projectRoot, docBaseUrl, docExamples } from "./docExamples.js"

/**
 * docs/CLIENT.md's examples, run as written against a real server holding the demo data.
 * Only two things are rewritten: the package name becomes this checkout's client module (the packaged
 * module is run in package.test.ts) and the address becomes the test server's. Each example's
 * `console.log` lines are the assertions. package.test.ts type-checks the same blocks against the
 * declarations `npm pack` ships.
 */
let server: TestServer
let key: string
let dir: string
const examples = docExamples()

/** What each example prints, line by line. */
const expectedOutput: Record<string, ReadonlyArray<string | RegExp>> = {
  receipt: ["T3 CURRENT NOT_ISSUED", "ACTIONABLE logged and signed"],
  errors: [/^DeterminationNotFound \S/],
  effect: [/^[1-9]\d* events verified$/],
  webhook: ["determination.updated verified"]
}

beforeAll(async () => {
  // The webhook example's receiver is on loopback: the development allowances are on here.
  server = await startTestServer({ config: isolatedConfig({ PV_WEBHOOK_ALLOW_HTTP: "true", PV_WEBHOOK_ALLOW_PRIVATE: "true" }) })
  for (const { publicId, body } of demoDeterminations(Date.now())) {
    expect((await putDetermination(server, publicId, body)).status).toBe(201)
  }
  key = (await createKey(server, ["trust:read", "receipt:write", "receipt:read", "subscription:write"], { tenant_id: "demo" })).api_key
  // Inside the project (so `effect` resolves from its node_modules), in an ignored directory.
  mkdirSync(join(projectRoot, ".pv-test-data"), { recursive: true })
  dir = mkdtempSync(join(projectRoot, ".pv-test-data", "doc-examples-"))
})
afterAll(async () => {
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  await server?.close()
})

/** Waits for a webhook subscription of the key, then stores a changed version of the demo determination (one event). */
const changeOnceSubscribed = async () => {
  for (let i = 0; i < 100; i++) {
    const listed = await request(server, "GET", "/api/v1/subscriptions", { bearer: key })
    if (listed.body.subscriptions.some((s: { delivery: string }) => s.delivery === "webhook")) {
      const demo = demoDeterminations(Date.now()).find((d) => d.publicId === "DET-V1-ACME-ROBOTICS-0001")!
      expect((await putDetermination(server, demo.publicId, { ...demo.body, limitations: [...demo.body.limitations, "Webhook example"] })).status).toBe(200)
      return
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error("the webhook example never subscribed")
}

describe(`docs/CLIENT.md TypeScript client examples (${process.env.PV_TEST_DB ?? "pglite"})`, () => {
  it("marks every ts block as an example, and each has its expected output here", () => {
    expect(examples.map((example) => example.name)).toEqual(Object.keys(expectedOutput))
  })

  it.each(examples.map((example) => [example.name, example] as const))("runs the example %s", async (name, example) => {
    expect(example.code, "imports the package by name").toContain(`"${packageSpecifier}"`)
    expect(example.code, "talks to the documented address").toContain(docBaseUrl)
    const source = example.code
      .replaceAll(`"${packageSpecifier}"`, JSON.stringify(join(projectRoot, "src/client/index.ts")))
      .replaceAll(docBaseUrl, server.baseUrl)
    const file = join(dir, `${name}.ts`)
    writeFileSync(file, source)
    const printed: Array<string> = []
    const log = vi.spyOn(console, "log").mockImplementation((...args: Array<unknown>) => void printed.push(args.map(String).join(" ")))
    process.env.KEY = key
    // The webhook example waits for a delivery: once its subscription exists, the operator changes the determination.
    const changed = name === "webhook" ? changeOnceSubscribed() : undefined
    try {
      await import(/* @vite-ignore */ file)
      await changed
    } catch (error) {
      throw new Error(`docs/CLIENT.md:${example.line}: example ${name} failed: ${String(error)}`, { cause: error })
    } finally {
      log.mockRestore()
      delete process.env.KEY
    }
    const expected = expectedOutput[name]!
    expect(printed, `docs/CLIENT.md:${example.line}`).toHaveLength(expected.length)
    expected.forEach((line, i) => (typeof line === "string" ? expect(printed[i]).toBe(line) : expect(printed[i]).toMatch(line)))
  })
})
