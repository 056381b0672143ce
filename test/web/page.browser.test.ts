import type { Browser, Page } from "playwright-core"
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { privateKeyFromSeed, testSigningSeed, signerFromPrivateKey } from "../../src/events/Signer.js"
import { signCheckpoint } from "../../src/log/Checkpoint.js"
import { cosignerFromPrivateKey } from "../../src/log/Cosignature.js"
import { entryBytesOf, eventEntryOf, receiptEntryOf } from "../../src/log/Entries.js"
import { testLogSigningSeed } from "../../src/log/LogKey.js"
import { leafHash, rootOf, subtreeHashesOf } from "../../src/log/Merkle.js"
import { noteSignerFromPrivateKey, verifierKeyOfSigner } from "../../src/log/Note.js"
import { receiptProofBundle, type SignedRelianceReceipt } from "../../src/log/ReceiptProof.js"
import { contentSecurityPolicy } from "../../src/web/Web.js"
import { DAY_MS, determinationBody } from "../support/fixtures.js"
import { createKey, putDetermination, request } from "../support/http.js"
import { startTestServer, type TestServer } from "../support/server.js"
import { launchChromium, loadPage, openPage, pasteText, screenshot, screenshotOnFailure } from "./browser.js"

/**
 * The page at `/` in a real browser (Debian's chromium through playwright-core) against the real
 * server: a lookup, the event chain verified in the page (and a tampered feed refused at the right
 * sequence), and receipt proof bundles checked step by step. Screenshots go to docs/screenshots.
 */

const subject = "DET-V1-WEB-PAGE-0001"

let server: TestServer
let browser: Browser
let page: Page
let pageErrors: Array<string>
let reader: string
let asOf: number
let launchFailure: unknown

const flipHex = (hex: string) => (hex[0] === "0" ? "1" : "0") + hex.slice(1)

/** The feed as a relying party saves it: every page's events, the head and the public id. */
const savedFeed = async () => {
  const reply = await request(server, "GET", `/api/v1/events?public_id=${subject}&limit=1000`, { bearer: reader })
  expect(reply.status, reply.text).toBe(200)
  return reply.body as { public_id: string; events: Array<any>; head: { sequence: number; eventHash: string } }
}

/**
 * A receipt's proof bundle from GET /reliance-receipts/{id}/proof once its entry is integrated (within
 * 2 s). Were the endpoint missing, the same bundle is built here from the log's pure functions, signed
 * with the keys the test server uses.
 */
const proofBundle = async (principal = "agent:web-page"): Promise<{ readonly bundle: any; readonly source: "endpoint" | "built" }> => {
  const created = await request(server, "POST", "/api/v1/reliance-receipts", {
    bearer: reader,
    body: {
      tenant_id: "tenant-a",
      organization: "Acme Procurement",
      principal,
      subject_public_id: subject,
      purpose_id: "supplier-onboarding",
      requested_action: "approve",
      claim_scope: ["identity"]
    }
  })
  expect(created.status, created.text).toBe(201)
  const { idempotent: _, ...receipt } = created.body
  const deadline = Date.now() + 10_000
  for (;;) {
    const reply = await request(server, "GET", `/api/v1/reliance-receipts/${receipt.receipt_id}/proof`, { bearer: reader })
    if (reply.status === 200) return { bundle: reply.body, source: "endpoint" as const }
    if (reply.status !== 404 || reply.body?.code !== "not-yet-logged") break
    if (Date.now() > deadline) throw new Error(`the receipt was not logged within 10 s: ${reply.text}`)
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  const origin = "localhost/pv-log"
  const logKey = privateKeyFromSeed(testLogSigningSeed)
  const events = (await savedFeed()).events
  const entries = [...events.map((event) => eventEntryOf(event)), receiptEntryOf(receipt)]
  const subtree = subtreeHashesOf(entries.map((entry) => leafHash(entryBytesOf(entry))))
  const checkpoint = signCheckpoint({ origin, size: entries.length, root: rootOf(entries.length, subtree), extensions: [] },
    noteSignerFromPrivateKey(origin, logKey))
  return { source: "built" as const, bundle: JSON.parse(JSON.stringify(receiptProofBundle({
    receipt: receipt as SignedRelianceReceipt,
    leafIndex: entries.length - 1,
    checkpoint,
    subtree,
    verifierKey: verifierKeyOfSigner(origin, logKey),
    receiptKey: signerFromPrivateKey(privateKeyFromSeed(testSigningSeed), "seed").jwk
  }))) }
}

beforeAll(async () => {
  server = await startTestServer({ database: "pglite" })
  // Without chromium every test fails with what to install (beforeEach), rather than being skipped.
  browser = await launchChromium().catch((error: unknown) => {
    launchFailure = error
    return undefined as unknown as Browser
  })
  if (launchFailure === undefined) ({ page, errors: pageErrors } = await openPage(browser))
  reader = (await createKey(server, ["trust:read", "receipt:write", "receipt:read"])).api_key
  asOf = Date.now() - DAY_MS
  // Four events: recorded, two updates and a lifecycle change.
  const versions = [
    determinationBody(asOf, { tier: "T2" }),
    determinationBody(asOf, { tier: "T3" }),
    determinationBody(asOf, { tier: "T3", lifecycle_state: "ACTIVE" }),
    determinationBody(asOf, { tier: "T3", lifecycle_state: "ACTIVE", limitations: ["Entity only", "No site visit"] })
  ]
  for (const version of versions) {
    const reply = await putDetermination(server, subject, version)
    expect([200, 201], reply.text).toContain(reply.status)
  }
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

const lookUp = async (publicId: string) => {
  await page.fill("#public-id", publicId)
  await page.click("#lookup-form button[type=submit]")
}

describe("the page at / (chromium)", () => {
  it("is served with its content types, no-cache with ETags, and a strict self-only CSP", async () => {
    const html = await request(server, "GET", "/")
    expect(html.status).toBe(200)
    expect(html.headers.get("content-type")).toBe("text/html; charset=utf-8")
    expect(html.headers.get("content-security-policy")).toBe(contentSecurityPolicy)
    expect(contentSecurityPolicy).toContain("default-src 'none'")
    expect(contentSecurityPolicy).toContain("script-src 'self'")
    expect(contentSecurityPolicy).not.toMatch(/unsafe|https?:/)
    expect(html.headers.get("cache-control")).toBe("no-cache")
    expect(html.headers.get("x-content-type-options")).toBe("nosniff")
    // No inline script, style or handler: everything comes from /web/.
    expect(html.text).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>|<style|\son[a-z]+=|style=/i)
    for (const [path, type] of [
      ["/web/app.js", "text/javascript; charset=utf-8"],
      ["/web/verify.js", "text/javascript; charset=utf-8"],
      ["/web/style.css", "text/css; charset=utf-8"],
      ["/web/icon.svg", "image/svg+xml"]
    ] as const) {
      const reply = await request(server, "GET", path)
      expect(reply.status, path).toBe(200)
      expect(reply.headers.get("content-type"), path).toBe(type)
      const etag = reply.headers.get("etag")!
      expect(etag).toMatch(/^"[A-Za-z0-9_-]{22}"$/)
      const again = await request(server, "GET", path, { headers: { "if-none-match": etag } })
      expect(again.status, path).toBe(304)
      expect(again.text).toBe("")
    }
    // The verifier is one bundled module (src/web/browser.ts and src/verify): it imports nothing.
    const bundle = await request(server, "GET", "/web/verify.js")
    expect(bundle.text).toContain("cosignature/v1")
    expect(bundle.text).not.toMatch(/^\s*import\b|^\s*export\b[^\n]*\bfrom\s*["']|\bimport\s*\(|node:/m)
    expect((await request(server, "GET", "/web/live.js")).status).toBe(404)
    // Module scripts are fetched with an Origin header: the page's files are open to browsers (no credential).
    const crossOrigin = await request(server, "GET", "/web/verify.js", { headers: { origin: "https://elsewhere.example" } })
    expect(crossOrigin.status).toBe(200)
    expect(crossOrigin.headers.get("access-control-allow-origin")).toBe("*")
    const missing = await request(server, "GET", "/web/nothing.js")
    expect(missing.status).toBe(404)
    expect(missing.headers.get("content-type")).toMatch(/^application\/problem\+json/)
  })

  it("looks a determination up: tier, freshness, lifecycle, authority and the prohibited inferences", async () => {
    await lookUp(subject)
    const card = page.locator(`article[data-public-id="${subject}"]`)
    await card.waitFor()
    await expect(card.locator(".tier").textContent()).resolves.toBe("Tier T3")
    const freshness = await card.locator("[data-fact=freshness]").textContent()
    expect(freshness).toContain("CURRENT")
    expect(freshness).toContain(new Date(asOf).toISOString())
    expect(freshness).toContain(new Date(asOf + 100 * DAY_MS).toISOString())
    await expect(card.locator("[data-fact=lifecycle]").textContent()).resolves.toContain("ACTIVE")
    const authority = await card.locator("[data-fact=authority]").textContent()
    expect(authority).toContain("issuance NOT_AUTHORIZED")
    expect(authority).toContain("No credential has been issued; none may be inferred.")
    await expect(card.locator("[data-rule=reliance]").textContent()).resolves.toBe(
      "A successful resolution is not permission to rely: check freshness CURRENT, lifecycle, authority and claim scope before relying."
    )
    await expect(card.locator("[data-fact=prohibited] li").allTextContents()).resolves.toEqual(["credential_issued"])
    await expect(card.locator("[data-fact=claims] li").allTextContents()).resolves.toEqual(["identity", "assurance"])
    expect(page.url()).toBe(`${server.baseUrl}/?id=${subject}`)
    await screenshot(page, "lookup", "#lookup")

    // The link it leaves behind looks the same determination up again.
    await page.goto(`${server.baseUrl}/?id=${subject}`)
    await expect(page.locator(".tier").textContent()).resolves.toBe("Tier T3")
  })

  it("shows an unknown id's 404 and a malformed id's 400 from their problem documents", async () => {
    await lookUp("DET-V1-NOBODY-9999")
    const notFound = page.locator("#lookup-result .problem")
    await notFound.waitFor()
    await expect(notFound.getAttribute("data-status")).resolves.toBe("404")
    await expect(notFound.getAttribute("data-code")).resolves.toBe("determination-not-found")
    expect(await notFound.textContent()).toMatch(/^404 /)
    await screenshot(page, "lookup-not-found", "#lookup")

    await lookUp("not-an-id")
    const invalid = page.locator("#lookup-result .problem[data-status='400']")
    await invalid.waitFor()
    await expect(invalid.getAttribute("data-code")).resolves.toBe("invalid-public-id")
  })

  it("fetches the event feed with a key and verifies every hash, link and signature in the page", async () => {
    await lookUp(subject)
    await page.locator("article .tier").waitFor()
    await page.fill("#api-key", reader)
    await page.click("#chain-fetch-form button[type=submit]")
    const verdict = page.locator("#chain-result .verdict")
    await verdict.waitFor()
    await expect(verdict.getAttribute("data-verdict")).resolves.toBe("ok")
    expect(await verdict.textContent()).toContain(`Chain verified: 4 event(s) of ${subject}`)
    const rows = page.locator("#chain-result tbody tr")
    await expect(rows.count()).resolves.toBe(4)
    await expect(rows.locator("td:first-child").allTextContents()).resolves.toEqual(["1", "2", "3", "4"])
    await expect(rows.locator("td:nth-child(2)").allTextContents()).resolves.toEqual([
      "determination.recorded", "determination.updated", "lifecycle.changed", "determination.updated"
    ])
    await expect(page.locator("#chain-result [data-ok=false]").count()).resolves.toBe(0)
    await expect(page.locator("#chain-result [data-ok=true]").count()).resolves.toBe(12)
    await expect(rows.locator("td[data-check=signature]").first().textContent()).resolves.toMatch(/kid [0-9a-f]{16}/)
    // The key was used, not kept: not in the URL, storage or cookies.
    const kept = await page.evaluate("({ storage: localStorage.length + sessionStorage.length, cookie: document.cookie, url: location.href })")
    expect(kept).toEqual({ storage: 0, cookie: "", url: `${server.baseUrl}/?id=${subject}` })
    await screenshot(page, "chain-verified", "#chain")
    await page.click("#forget-key")
    await expect(page.inputValue("#api-key")).resolves.toBe("")
  })

  it("verifies a pasted feed, and names the sequence whose payload was changed", async () => {
    const feed = await savedFeed()
    await pasteText(page, "#feed-json", JSON.stringify(feed, null, 2))
    await page.click("#chain-paste-form button[type=submit]")
    await expect(page.locator("#chain-result .verdict").getAttribute("data-verdict")).resolves.toBe("ok")

    const tampered = structuredClone(feed)
    tampered.events[2].payload = { ...tampered.events[2].payload, to: "REVOKED" }
    await pasteText(page, "#feed-json", JSON.stringify(tampered, null, 2))
    await page.click("#chain-paste-form button[type=submit]")
    const verdict = page.locator("#chain-result .verdict[data-verdict=failed]")
    await verdict.waitFor()
    await expect(verdict.getAttribute("data-sequence")).resolves.toBe("3")
    await expect(verdict.getAttribute("data-reason")).resolves.toBe("hash-mismatch")
    expect(await verdict.textContent()).toMatch(/^Chain broken at sequence 3 \(hash-mismatch\)/)
    const row = page.locator("#chain-result tr.failing")
    await expect(row.getAttribute("data-sequence")).resolves.toBe("3")
    await expect(row.locator("td[data-check=hash] .tick").getAttribute("data-ok")).resolves.toBe("false")
    // Only the changed event's own hash is wrong; its link and signature (over the stated hash) still hold.
    await expect(page.locator("#chain-result [data-ok=false]").count()).resolves.toBe(1)
    await screenshot(page, "chain-rejected", "#chain")

    // An event removed from the end is caught against the head.
    const truncated = { ...feed, events: feed.events.slice(0, 3) }
    await pasteText(page, "#feed-json", JSON.stringify(truncated))
    await page.click("#chain-paste-form button[type=submit]")
    const short = page.locator("#chain-result .verdict[data-verdict=failed]")
    await short.waitFor()
    await expect(short.getAttribute("data-reason")).resolves.toBe("head-mismatch")
    await expect(short.getAttribute("data-sequence")).resolves.toBe("4")
  })

  describe("receipt proof bundles", () => {
    let bundle: any

    beforeAll(async () => {
      const proof = await proofBundle()
      bundle = proof.bundle
      if (proof.source === "built") console.warn("GET /api/v1/reliance-receipts/{id}/proof is missing: the bundle was built in the test")
    })

    const verify = async (pasted: unknown, keys: "service" | "bundle" = "service") => {
      await pasteText(page, "#bundle-json", JSON.stringify(pasted, null, 2))
      await page.check(`input[name=bundle-keys][value=${keys}]`)
      await page.click("#bundle-form button[type=submit]")
      const verdict = page.locator("#bundle-result .verdict")
      await verdict.waitFor()
      return verdict
    }

    const stepStates = () =>
      page.locator("#bundle-result li.step").evaluateAll((items) => items.map((li) => [li.getAttribute("data-step"), li.getAttribute("data-ok")]))

    it("passes every step for the service's bundle, pinned to the service's keys", async () => {
      const verdict = await verify(bundle)
      await expect(verdict.getAttribute("data-verdict")).resolves.toBe("ok")
      await expect(stepStates()).resolves.toEqual(
        ["digest", "entry", "leaf", "inclusion", "checkpoint_signature", "receipt_signature"].map((step) => [step, "true"])
      )
      expect(await page.locator("#bundle-result").textContent()).toContain("pinned to this service's")
      await screenshot(page, "bundle-verified", "#bundle")
    })

    it("rejects a flipped inclusion path hash at the inclusion step", async () => {
      expect(bundle.inclusion_path.length).toBeGreaterThan(0)
      const tampered = structuredClone(bundle)
      tampered.inclusion_path[0] = flipHex(tampered.inclusion_path[0])
      const verdict = await verify(tampered)
      await expect(verdict.getAttribute("data-failed-step")).resolves.toBe("inclusion")
      expect(await verdict.textContent()).toMatch(/^Rejected at step “inclusion”/)
      await expect(stepStates()).resolves.toEqual([
        ["digest", "true"], ["entry", "true"], ["leaf", "true"], ["inclusion", "false"], ["checkpoint_signature", "true"], ["receipt_signature", "true"]
      ])
      await screenshot(page, "bundle-rejected", "#bundle")
    })

    it("rejects a changed snapshot at the digest step, and a foreign signature at its own step", async () => {
      const snapshot = structuredClone(bundle)
      snapshot.receipt.snapshot_payload.principal = "agent:someone-else"
      await expect((await verify(snapshot)).getAttribute("data-failed-step")).resolves.toBe("digest")

      const checkpoint = structuredClone(bundle)
      const lines: Array<string> = checkpoint.checkpoint.split("\n")
      const signatureLine = lines.findIndex((line) => line.startsWith("\u2014 "))
      const [dash, name, sig] = lines[signatureLine]!.split(" ")
      const bytes = Buffer.from(sig!, "base64")
      bytes[10] = bytes[10]! ^ 1
      lines[signatureLine] = [dash, name, bytes.toString("base64")].join(" ")
      checkpoint.checkpoint = lines.join("\n")
      await expect((await verify(checkpoint)).getAttribute("data-failed-step")).resolves.toBe("checkpoint_signature")

      const receiptSig = structuredClone(bundle)
      receiptSig.receipt.signature.sig = receiptSig.receipt.signature.sig.startsWith("A")
        ? "B" + receiptSig.receipt.signature.sig.slice(1)
        : "A" + receiptSig.receipt.signature.sig.slice(1)
      await expect((await verify(receiptSig)).getAttribute("data-failed-step")).resolves.toBe("receipt_signature")
    })

    it("with witness keys typed in, requires their cosignatures: a checkpoint they did not cosign fails at the witness step", async () => {
      const witnessKey = cosignerFromPrivateKey("witness.test/w1", privateKeyFromSeed(Buffer.alloc(32, 51))).verifierKey
      await page.fill("#witness-keys", witnessKey)
      await page.fill("#witness-quorum", "1")
      try {
        const verdict = await verify(bundle)
        await expect(verdict.getAttribute("data-failed-step")).resolves.toBe("witness_cosignatures")
        expect(await verdict.textContent()).toContain("0 of the 1 pinned witnesses cosigned the checkpoint (none); the quorum is 1")
        await expect(stepStates()).resolves.toEqual([
          ["digest", "true"], ["entry", "true"], ["leaf", "true"], ["inclusion", "true"], ["checkpoint_signature", "true"],
          ["witness_cosignatures", "false"], ["receipt_signature", "true"]
        ])
      } finally {
        await page.fill("#witness-keys", "")
        await page.fill("#witness-quorum", "")
      }
    })

    it("counts a witness key typed twice once: two lines of one key cannot meet a quorum of 2", async () => {
      const witnessKey = cosignerFromPrivateKey("witness.test/w1", privateKeyFromSeed(Buffer.alloc(32, 51))).verifierKey
      await page.fill("#witness-keys", `${witnessKey}\n${witnessKey}`)
      await page.fill("#witness-quorum", "2")
      try {
        const verdict = await verify(bundle)
        await expect(verdict.getAttribute("data-failed-step")).resolves.toBe("witness_cosignatures")
        expect(await verdict.textContent()).toContain("the quorum 2 is not between 1 and the 1 distinct pinned witness(es)")
      } finally {
        await page.fill("#witness-keys", "")
        await page.fill("#witness-quorum", "")
      }
    })

    it("with the bundle's own keys says so, and shows a bundle without a receipt key as not verified", async () => {
      const { receipt_key: _, ...withoutKey } = bundle
      const verdict = await verify(withoutKey, "bundle")
      await expect(verdict.getAttribute("data-verdict")).resolves.toBe("incomplete")
      await expect(page.locator("#bundle-result li.step[data-step=receipt_signature]").getAttribute("class")).resolves.toContain("skip")
      expect(await page.locator("#bundle-result").textContent()).toContain("agrees with itself")
    })

    it("says plainly when the paste is not JSON", async () => {
      await page.fill("#bundle-json", "{ not json")
      await page.click("#bundle-form button[type=submit]")
      await expect(page.locator("#bundle-result .problem-title").textContent()).resolves.toBe("Not JSON")
    })
  })

  describe("a receipt's proof in each of its four encodings, given as a file, dropped or pasted", () => {
    type Kind = "bundle" | "tlog-proof" | "cose-receipt" | "transparent-statement"
    let receipt: any
    const artifacts = new Map<Kind, Uint8Array>()

    /** The evidence as the service serves it: GET /reliance-receipts/{id}/proof, /tlog-proof, /cose-receipt, /transparent-statement. */
    beforeAll(async () => {
      const proof = await proofBundle("agent:web-page-evidence")
      expect(proof.source).toBe("endpoint")
      receipt = proof.bundle.receipt
      for (const [kind, path, type] of [
        ["bundle", "proof", "application/json"],
        ["tlog-proof", "tlog-proof", "text/plain; charset=utf-8"],
        ["cose-receipt", "cose-receipt", "application/scitt-receipt+cose"],
        ["transparent-statement", "transparent-statement", "application/scitt-statement+cose"]
      ] as const) {
        const response = await fetch(`${server.baseUrl}/api/v1/reliance-receipts/${receipt.receipt_id}/${path}`, { headers: { authorization: `Bearer ${reader}` } })
        expect(response.status, path).toBe(200)
        expect(response.headers.get("content-type"), path).toContain(type)
        artifacts.set(kind, new Uint8Array(await response.arrayBuffer()))
      }
    })

    const clear = () => page.locator("#bundle-result").evaluate((node) => node.replaceChildren())

    const verdictOf = async (kind: Kind) => {
      const verdict = page.locator(`#bundle-result .verdict[data-kind="${kind}"]`)
      await verdict.waitFor()
      return verdict
    }

    /** Through the file picker (setInputFiles). */
    const choose = async (kind: Kind, bytes: Uint8Array) => {
      await clear()
      await page.setInputFiles("#evidence-file", { name: `${kind}.bin`, mimeType: "application/octet-stream", buffer: Buffer.from(bytes) })
      return verdictOf(kind)
    }

    /** Dropped on the form: a drop event whose DataTransfer holds the file. */
    const drop = async (kind: Kind, bytes: Uint8Array) => {
      await clear()
      // The DOM's constructors through globalThis: the tests are type-checked without the DOM's types.
      await page.locator("#bundle-form").evaluate((form, { data, name }) => {
        const dom = globalThis as any
        const transfer = new dom.DataTransfer()
        transfer.items.add(new File([new Uint8Array(data)], name))
        form.dispatchEvent(new dom.DragEvent("drop", { dataTransfer: transfer, bubbles: true, cancelable: true }))
      }, { data: Array.from(bytes), name: `${kind}.bin` })
      return verdictOf(kind)
    }

    /** Pasted into the box (text as it is; binary as base64). */
    const paste = async (kind: Kind, pasted: string) => {
      await clear()
      await pasteText(page, "#bundle-json", pasted)
      await page.click("#bundle-form button[type=submit]")
      return verdictOf(kind)
    }

    const stepStates = () =>
      page.locator("#bundle-result li.step").evaluateAll((items) => items.map((li) => [li.getAttribute("data-step"), li.getAttribute("data-ok")]))

    const allPassed = async (verdict: Awaited<ReturnType<typeof verdictOf>>, steps: ReadonlyArray<string>) => {
      await expect(verdict.getAttribute("data-verdict")).resolves.toBe("ok")
      await expect(stepStates()).resolves.toEqual(steps.map((step) => [step, "true"]))
    }

    const changed = (bytes: Uint8Array, at: number) => {
      const copy = Uint8Array.from(bytes)
      copy[at] = copy[at]! ^ 1
      return copy
    }

    const tlogSteps = ["format", "entry", "leaf", "inclusion", "checkpoint_signature"]
    const coseSteps = ["format", "entry", "leaf", "inclusion", "kid", "log_signature"]
    const statementSteps = ["format", "kid", "statement_signature", "digest", "claims", "entry", "format", "leaf", "inclusion", "kid", "log_signature", "receipt_signature"]

    it("verifies each kind given as a file, pinned to the service's keys, and shows the keys it trusted", async () => {
      const logKey = (await request(server, "GET", "/api/v1/log/key")).body.verifier_key as string
      await allPassed(await drop("bundle", artifacts.get("bundle")!), ["digest", "entry", "leaf", "inclusion", "checkpoint_signature", "receipt_signature"])
      await allPassed(await choose("tlog-proof", artifacts.get("tlog-proof")!), tlogSteps)
      await expect(page.locator("#bundle-result [data-evidence-kind]").textContent()).resolves.toBe("Recognised as: tlog-proof")
      await expect(page.locator("#bundle-result [data-trusted=log-key]").textContent()).resolves.toBe(`log key (GET /api/v1/log/key): ${logKey}`)
      await expect(page.locator("#bundle-result [data-trusted=receipt-keys]").textContent()).resolves.toMatch(/^receipt keys \(GET \/api\/v1\/events\/keys\): kid [0-9a-f]{16}/)
      // The paste box shows what was verified: the proof's text.
      await expect(page.inputValue("#bundle-json")).resolves.toBe(new TextDecoder().decode(artifacts.get("tlog-proof")!))

      await page.fill("#evidence-receipt", JSON.stringify(receipt))
      try {
        await allPassed(await choose("cose-receipt", artifacts.get("cose-receipt")!), coseSteps)
        // …shown as base64 in the box, so the Verify button checks it again.
        await expect(page.inputValue("#bundle-json")).resolves.toBe(Buffer.from(artifacts.get("cose-receipt")!).toString("base64"))
        await expect(page.locator("#evidence-loaded").textContent()).resolves.toContain("recognised as COSE Receipt")
      } finally {
        await page.fill("#evidence-receipt", "")
      }
      await allPassed(await drop("transparent-statement", artifacts.get("transparent-statement")!), statementSteps)
      await screenshot(page, "statement-verified", "#bundle")
    })

    it("names the first failing step of a tampered copy of each kind", async () => {
      const tamperedBundle = JSON.parse(new TextDecoder().decode(artifacts.get("bundle")!))
      tamperedBundle.inclusion_path[0] = flipHex(tamperedBundle.inclusion_path[0])
      const bundle = await drop("bundle", new TextEncoder().encode(JSON.stringify(tamperedBundle)))
      await expect(bundle.getAttribute("data-failed-step")).resolves.toBe("inclusion")

      // One path hash of the tlog-proof changed (its first base64 character, so it stays canonical).
      const lines = new TextDecoder().decode(artifacts.get("tlog-proof")!).split("\n")
      const pathLine = lines.findIndex((line) => line.startsWith("index ")) + 1
      expect(lines[pathLine]).toMatch(/^[A-Za-z0-9+/]{43}=$/)
      lines[pathLine] = (lines[pathLine]![0] === "A" ? "B" : "A") + lines[pathLine]!.slice(1)
      const proof = await paste("tlog-proof", lines.join("\n"))
      await expect(proof.getAttribute("data-failed-step")).resolves.toBe("inclusion")
      expect(await proof.textContent()).toMatch(/^Rejected at step “inclusion”: the inclusion path does not lead from leaf \d+/)

      // The last byte of each COSE object is its signature's.
      await page.fill("#evidence-receipt", JSON.stringify(receipt))
      try {
        const cose = await choose("cose-receipt", changed(artifacts.get("cose-receipt")!, artifacts.get("cose-receipt")!.length - 1))
        await expect(cose.getAttribute("data-failed-step")).resolves.toBe("log_signature")
        await expect(stepStates()).resolves.toEqual([
          ["format", "true"], ["entry", "true"], ["leaf", "true"], ["inclusion", "true"], ["kid", "true"], ["log_signature", "false"]
        ])
      } finally {
        await page.fill("#evidence-receipt", "")
      }
      const statement = await drop("transparent-statement", changed(artifacts.get("transparent-statement")!, artifacts.get("transparent-statement")!.length - 1))
      await expect(statement.getAttribute("data-failed-step")).resolves.toBe("statement_signature")
      await screenshot(page, "statement-rejected", "#bundle")
    })

    it("takes a COSE object pasted as base64, and a bare COSE Receipt without its receipt fails at the entry step", async () => {
      const statement = Buffer.from(artifacts.get("transparent-statement")!)
      await allPassed(await paste("transparent-statement", statement.toString("base64").replace(/(.{76})/g, "$1\n")), statementSteps)
      await allPassed(await paste("transparent-statement", statement.toString("base64url")), statementSteps)
      const bare = await paste("cose-receipt", Buffer.from(artifacts.get("cose-receipt")!).toString("base64"))
      await expect(bare.getAttribute("data-failed-step")).resolves.toBe("entry")
      expect(await bare.textContent()).toContain("a COSE Receipt does not carry its entry")

      await clear()
      await page.fill("#bundle-json", Buffer.from("not evidence at all").toString("base64"))
      await page.click("#bundle-form button[type=submit]")
      await expect(page.locator("#bundle-result .problem-title").textContent()).resolves.toBe("Not a receipt's proof")
    })

    it("checks against keys pasted by the reader: a wrong log key fails the log's signature step", async () => {
      const logKey = (await request(server, "GET", "/api/v1/log/key")).body.verifier_key as string
      const jwks = (await request(server, "GET", "/api/v1/events/keys")).text
      const otherLogKey = verifierKeyOfSigner("localhost/pv-log", privateKeyFromSeed(Buffer.alloc(32, 77)))
      await page.check("input[name=bundle-keys][value=pasted]")
      await page.fill("#pin-jwks", jwks)
      try {
        await page.fill("#pin-log-key", logKey)
        await allPassed(await choose("transparent-statement", artifacts.get("transparent-statement")!), statementSteps)
        await expect(page.locator("#bundle-result [data-trusted=log-key]").textContent()).resolves.toBe(`log key (pasted): ${logKey}`)
        await page.fill("#pin-log-key", otherLogKey)
        const proof = await paste("tlog-proof", new TextDecoder().decode(artifacts.get("tlog-proof")!))
        await expect(proof.getAttribute("data-failed-step")).resolves.toBe("checkpoint_signature")
        // Nothing pasted: a tlog-proof carries no key, so its checkpoint is not verified (and the page says so).
        await page.fill("#pin-log-key", "")
        const unpinned = await paste("tlog-proof", new TextDecoder().decode(artifacts.get("tlog-proof")!))
        await expect(unpinned.getAttribute("data-verdict")).resolves.toBe("incomplete")
      } finally {
        await page.fill("#pin-jwks", "")
        await page.fill("#pin-log-key", "")
        await page.check("input[name=bundle-keys][value=service]")
      }
    })

    it("fetches the service's witness policy into the box when asked, shows it as trusted, and requires its quorum", async () => {
      const policy = (await request(server, "GET", "/api/v1/log/policy")).text
      await page.click("#fetch-policy")
      await expect.poll(() => page.inputValue("#pin-policy")).toBe(policy)
      try {
        await allPassed(await paste("tlog-proof", new TextDecoder().decode(artifacts.get("tlog-proof")!)), [...tlogSteps, "witness_cosignatures"])
        expect(await page.locator("#bundle-result [data-trusted=policy]").textContent()).toContain(policy.trim())
      } finally {
        await page.fill("#pin-policy", "")
      }
    })
  })
})
