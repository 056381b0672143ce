import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"

/**
 * `verifyWebhook` is what relying parties import from `pv-trust-service/client`: it must not pull in the
 * service's delivery code (src/webhooks: http, dns, the SSRF rules), only Node's crypto.
 */
describe("the client's webhook verifier", () => {
  it("imports node:crypto and nothing else", () => {
    const source = readFileSync(new URL("../../src/client/webhook.ts", import.meta.url), "utf8")
    const specifiers = [...source.matchAll(/^\s*(?:import|export)\b[^"']*?from\s+["']([^"']+)["']/gm)].map((match) => match[1])
    expect(specifiers).toEqual(["node:crypto"])
    expect(source).not.toMatch(/\bimport\s*\(/)
  })

  it("is exported by the client's entry point", async () => {
    const client = await import("../../src/client/index.js")
    expect(typeof client.verifyWebhook).toBe("function")
  })
})
