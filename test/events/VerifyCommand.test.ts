import { it } from "@effect/vitest"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Cause, Effect, Exit } from "effect"
import { afterAll, describe, expect } from "vitest"
import { verifyEventsCommand } from "../../src/events/VerifyCommand.js"
import { buildChain, headOf, otherSigner, testJwks } from "./chains.js"

const dir = mkdtempSync(join(tmpdir(), "pv-verify-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const publicId = "DET-V1-SAVED-0001"
const events = buildChain(publicId, [
  { type: "determination.recorded", payload: { version: 1 } },
  { type: "determination.updated", payload: { version: 2, changed_fields: ["tier"] } },
  { type: "freshness.changed", payload: { freshness_state: "APPROACHING_STALE" } },
  { type: "lifecycle.changed", payload: { version: 3, lifecycle_state: "SUSPENDED" } }
])

const save = (name: string, content: unknown) => {
  const file = join(dir, name)
  writeFileSync(file, JSON.stringify(content))
  return file
}

/** The message of the one typed failure the exit holds (Effect 4 causes are a flat list of reasons). */
const failureMessage = (exit: Exit.Exit<unknown, { message: string }>) => {
  const reasons = Exit.isFailure(exit) ? exit.cause.reasons : []
  return reasons.length === 1 && Cause.isFailReason(reasons[0]!) ? reasons[0].error.message : "(no failure)"
}

describe("pv verify-events --file", () => {
  it.effect("a saved page with its JWKS verifies", () =>
    Effect.gen(function*() {
      const file = save("good.json", { public_id: publicId, events, next_after: null, head: headOf(events), jwks: testJwks })
      const verdict = yield* verifyEventsCommand({ file })
      expect(verdict).toMatchObject({ ok: true, count: 4, head: headOf(events) })
    }))

  it.effect("a changed payload, a removed event, reordered events, a forged signature and an unknown kid all fail", () =>
    Effect.gen(function*() {
      const page = (list: ReadonlyArray<unknown>) => ({ public_id: publicId, events: list, next_after: null, head: headOf(events), jwks: testJwks })
      const cases: Array<[string, ReadonlyArray<unknown>, string]> = [
        ["payload", events.map((e, i) => (i === 1 ? { ...e, payload: { version: 2, changed_fields: ["eligible"] } } : e)), "sequence 2 (hash-mismatch)"],
        ["removed", events.filter((_, i) => i !== 2), "sequence 3 (sequence-mismatch)"],
        ["removed-last", events.slice(0, 3), "sequence 4 (head-mismatch)"],
        ["reordered", [events[0], events[2], events[1], events[3]], "sequence 2 (sequence-mismatch)"],
        ["forged", buildChain(publicId, [
          { type: "determination.recorded", payload: { version: 1 } },
          { type: "determination.updated", payload: { version: 2 }, signer: { ...otherSigner, kid: testJwks.keys[0]!.kid } }
        ]), "sequence 2 (bad-signature)"],
        ["unknown-kid", buildChain(publicId, [{ type: "determination.recorded", payload: { version: 1 }, signer: otherSigner }]), "sequence 1 (unknown-kid)"]
      ]
      for (const [name, list, expected] of cases) {
        const content = name === "forged" || name === "unknown-kid"
          ? { public_id: publicId, events: list, jwks: testJwks }
          : page(list)
        const exit = yield* Effect.exit(verifyEventsCommand({ file: save(`${name}.json`, content) }))
        expect(failureMessage(exit), name).toContain(`chain broken at ${expected}`)
      }
    }))

  it.effect("a file without keys and without --base-url, or no options at all, is a usage failure", () =>
    Effect.gen(function*() {
      const noKeys = yield* Effect.exit(verifyEventsCommand({ file: save("bare.json", events) }))
      expect(failureMessage(noKeys)).toContain("--base-url")
      const none = yield* Effect.exit(verifyEventsCommand({}))
      expect(failureMessage(none)).toContain("usage")
    }))
})
