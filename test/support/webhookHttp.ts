import { expect } from "vitest"
import type { AppConfigShape } from "../../src/platform/Config.js"
import { determinationBody } from "./fixtures.js"
import { putDetermination } from "./http.js"
import type { TestServer } from "./server.js"
import { isolatedConfig } from "./testConfig.js"

/** What the webhook HTTP test files share: loopback receivers' settings, polling, and changes that each append one event. */

/** Loopback receivers need both development allowances. */
export const loopbackWebhookConfig = (env: Record<string, string> = {}): Partial<AppConfigShape> =>
  isolatedConfig({ PV_WEBHOOK_ALLOW_HTTP: "true", PV_WEBHOOK_ALLOW_PRIVATE: "true", ...env })

export { until } from "./http.js"

/** Tier values to move a determination through: each PUT with the next one appends one event. */
const tiers = ["T1", "T2", "T3", "T4"] as const

/**
 * One stored change of a determination (a new tier or eligibility) per call, hence exactly one new event;
 * `server` is read at each call (test files start theirs in beforeAll).
 */
export const determinationChanges = (server: () => TestServer, asOf: number) => {
  let changes = 0
  return async (publicId: string) => {
    changes += 1
    const reply = await putDetermination(server(), publicId, determinationBody(asOf, { tier: tiers[changes % 4]!, eligible: changes % 2 === 0 }))
    expect([200, 201], reply.text).toContain(reply.status)
  }
}
