import type { Browser, Page, Request } from "playwright-core"
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { TrustEvent } from "../../src/domain/TrustEvent.js"
import { HeartbeatComment, sseMessageOf } from "../../src/events/LiveStream.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, putDetermination, request } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"
import { launchChromium, loadPage, openPage, screenshot, screenshotOnFailure } from "./browser.js"

/**
 * The page following an event chain live, in a real browser (Debian's chromium through playwright-core)
 * against the real server: the stored events and then a new one verified as they arrive, a reconnect
 * that resumes with Last-Event-ID, a tampered event on the wire rejected by name, and a refused key.
 */

let server: TestServer
let browser: Browser
let page: Page
let pageErrors: Array<string>
let reader: string
let asOf: number
let launchFailure: unknown
let changes = 0
const tiers = ["T1", "T2", "T3", "T4"] as const
const StreamPath = "**/api/v1/events/stream?*"

/** Records a new event on `publicId` (a different tier each time, so each PUT is a change). */
const change = async (publicId: string) => {
  changes += 1
  const reply = await putDetermination(server, publicId, determinationBody(asOf, { tier: tiers[changes % 4]! }))
  expect([200, 201], reply.text).toContain(reply.status)
}

const storedEvents = async (publicId: string): Promise<Array<TrustEvent>> => {
  const reply = await request(server, "GET", `/api/v1/events?public_id=${publicId}&limit=1000`, { bearer: reader })
  expect(reply.status, reply.text).toBe(200)
  return reply.body.events
}

beforeAll(async () => {
  server = await startTestServer({ database: "pglite" })
  // Without chromium every test fails with what to install (beforeEach), rather than being skipped.
  browser = await launchChromium().catch((error: unknown) => {
    launchFailure = error
    return undefined as unknown as Browser
  })
  if (launchFailure === undefined) ({ page, errors: pageErrors } = await openPage(browser))
  reader = (await createKey(server, ["trust:read"])).api_key
  asOf = Date.now() - DAY_MS
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await server?.close()
})

beforeEach(async (test) => {
  if (launchFailure !== undefined) throw launchFailure
  screenshotOnFailure(test, page)
  await loadPage(page, pageErrors, server.baseUrl + "/")
})

afterEach(async () => {
  if (launchFailure !== undefined) return
  expect(pageErrors).toEqual([])
})

const follow = async (publicId: string, key = reader) => {
  await page.fill("#public-id", publicId)
  await page.fill("#api-key", key)
  await page.click("#follow-live")
}

const liveState = () => page.locator("#live-state").getAttribute("data-state")
const row = (sequence: number) => page.locator(`#live-events li[data-sequence="${sequence}"]`)
const verdicts = () =>
  page.locator("#live-events li").evaluateAll((items) => items.map((li) => [li.getAttribute("data-sequence"), li.getAttribute("data-verdict")]))

describe("the page follows an event chain live (chromium)", () => {
  it("verifies the stored events, then a new one within seconds of its PUT, and stops on Stop", async () => {
    const id = "DET-V1-WEB-LIVE-0001"
    await change(id)
    await change(id)
    await follow(id)
    await page.locator("#live-state[data-state=connected]").waitFor()
    await row(2).waitFor()
    await expect(verdicts()).resolves.toEqual([["1", "verified"], ["2", "verified"]])

    const started = Date.now()
    await change(id)
    await page.locator('#live-events li[data-sequence="3"][data-verdict=verified]').waitFor({ timeout: 5_000 })
    const elapsed = Date.now() - started
    expect(elapsed).toBeLessThan(5_000)
    console.info(`stream: the new event was verified on the page ${elapsed} ms after its PUT was sent`)
    await expect(row(3).locator("[data-check] .tick").evaluateAll((ticks) => ticks.map((t) => t.getAttribute("data-ok")))).resolves.toEqual(["true", "true", "true"])
    await expect(row(3).locator("[data-check=signature]").textContent()).resolves.toMatch(/kid [0-9a-f]{16}/)
    const stored = await storedEvents(id)
    expect(stored.map((e) => e.sequence)).toEqual([1, 2, 3])
    await expect(page.locator("#live-summary").textContent()).resolves.toBe("3 verified, 0 rejected: the chain is intact so far.")
    // The key was used, not kept: not in the URL, storage or cookies.
    const kept = await page.evaluate("({ storage: localStorage.length + sessionStorage.length, cookie: document.cookie, url: location.href })")
    expect(kept).toEqual({ storage: 0, cookie: "", url: `${server.baseUrl}/` })
    await screenshot(page, "stream-verified", "#chain")

    await page.click("#stop-live")
    await expect(liveState()).resolves.toBe("stopped")
    await expect(page.locator("#follow-live").isEnabled()).resolves.toBe(true)
    await expect(page.locator("#stop-live").isEnabled()).resolves.toBe(false)
    // Stopped means closed: a later change does not reach the page.
    await change(id)
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    await expect(page.locator("#live-events li").count()).resolves.toBe(3)
  })

  it("reconnects after the stream ends, resuming with Last-Event-ID, and misses nothing", async () => {
    const id = "DET-V1-WEB-LIVE-0002"
    await change(id)
    await change(id)
    const events = await storedEvents(id)
    const requests: Array<Request> = []
    // The first connection gets the two stored events and then ends, as a draining instance ends it.
    await page.route(StreamPath, async (route) => {
      requests.push(route.request())
      if (requests.length === 1) {
        await route.fulfill({ status: 200, contentType: "text/event-stream", body: events.map(sseMessageOf).join("") })
      } else await route.continue()
    })
    await follow(id)
    await row(2).waitFor()
    await page.locator("#live-state[data-state=connected]", { hasText: "resumed after sequence 2" }).waitFor({ timeout: 10_000 })
    expect(requests).toHaveLength(2)
    expect(requests[0]!.headers()["last-event-id"]).toBeUndefined()
    expect(requests[1]!.headers()["last-event-id"]).toBe("2")
    await change(id)
    await page.locator('#live-events li[data-sequence="3"][data-verdict=verified]').waitFor({ timeout: 5_000 })
    await expect(verdicts()).resolves.toEqual([["1", "verified"], ["2", "verified"], ["3", "verified"]])
    await page.click("#stop-live")
  })

  it("rejects a tampered event on the wire, naming the failed check, and judges the next one on its own", async () => {
    const id = "DET-V1-WEB-LIVE-0003"
    for (let i = 0; i < 4; i++) await change(id)
    const events = await storedEvents(id)
    const tampered = structuredClone(events)
    tampered[2] = { ...tampered[2]!, payload: { ...tampered[2]!.payload, fields: ["tier", "eligible"] } } as TrustEvent
    let served = 0
    await page.route(StreamPath, async (route) => {
      served += 1
      if (served === 1) {
        await route.fulfill({ status: 200, contentType: "text/event-stream", body: HeartbeatComment + tampered.map(sseMessageOf).join("") })
      } else await route.continue()
    })
    await follow(id)
    await row(4).waitFor()
    await expect(verdicts()).resolves.toEqual([["1", "verified"], ["2", "verified"], ["3", "rejected"], ["4", "verified"]])
    const bad = row(3)
    await expect(bad.getAttribute("data-reason")).resolves.toBe("hash-mismatch")
    expect(await bad.textContent()).toContain("✗ rejected: hash-mismatch")
    await expect(bad.locator("[data-check] .tick").evaluateAll((ticks) => ticks.map((t) => t.getAttribute("data-ok")))).resolves.toEqual(["false", "true", "true"])
    await expect(page.locator("#live-summary").textContent()).resolves.toBe("3 verified, 1 rejected: not intact since sequence 3.")
    // The served stream ended; the page resumed from the real one after the last event it received.
    await page.locator("#live-state[data-state=connected]").waitFor({ timeout: 10_000 })
    await expect(page.locator("#live-state").textContent()).resolves.toBe("connected: resumed after sequence 4")
    await screenshot(page, "stream-rejected", "#live-result")
    await page.click("#stop-live")
  })

  it("stops with the problem when the key is refused, and says what is missing", async () => {
    const id = "DET-V1-WEB-LIVE-0001"
    await follow(id, "pv_live_notakey")
    await page.locator("#live-state[data-state=stopped]").waitFor()
    const problem = page.locator("#live-result .problem")
    await expect(problem.getAttribute("data-status")).resolves.toBe("401")

    await page.fill("#api-key", "")
    await page.click("#follow-live")
    await expect(page.locator("#live-result .problem-title").textContent()).resolves.toBe("No API key")
  })
})
