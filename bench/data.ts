import { createHash } from "node:crypto"
import type { DeterminationBody } from "../src/domain/Determination.js"

const DAY = 86_400_000
const tiers = ["T0", "T1", "T2", "T3", "T4"] as const

export const benchPublicId = (i: number) => `DET-V1-BENCH-${String(i).padStart(7, "0")}`
export const chainPublicId = (name: string) => `DET-V1-CHAIN-${name}`

/** A realistic determination (3 claims, 2 evidence items), CURRENT for the length of a benchmark. */
export const benchBody = (i: number, nowMs: number, variant = 0): DeterminationBody => {
  const asOf = nowMs - 5 * DAY
  const tier = tiers[(i + variant) % tiers.length]!
  return {
    subject: { subject_id: `sub_bench_${i % 5000}`, physical_subject_id: `phys_${i}`, identity_state: "VERIFIED" },
    tier,
    eligible: tier !== "T0",
    why_this_tier: ["Registry identity verified", `Audit ${i % 7} within 12 months`],
    why_not_higher: tier === "T4" ? [] : ["Second independent audit missing"],
    claims: [
      { claim_id: `c-${i}-name`, type: "legal_name", value: `Bench Company ${i}`, scope: "identity" },
      { claim_id: `c-${i}-tier`, type: "assurance_tier", value: tier, scope: "assurance" },
      { claim_id: `c-${i}-n`, type: "audit_count", value: (i + variant) % 9, scope: "assurance" }
    ],
    evidence: [0, 1].map((k) => ({
      evidence_id: `ev-${i}-${k}`,
      kind: k === 0 ? "registry_extract" : "audit_report",
      digest: createHash("sha256").update(`${i}:${k}:${variant}`).digest("hex"),
      collected_at: new Date(asOf - (k + 1) * DAY).toISOString(),
      source: k === 0 ? "registry" : "auditor"
    })),
    allowed_claims: ["identity", "assurance"],
    limitations: ["Entity only"],
    prohibited_inferences: ["credential_issued"],
    lifecycle_state: "NOT_ISSUED",
    as_of: new Date(asOf).toISOString(),
    valid_until: new Date(asOf + 365 * DAY).toISOString(),
    engine: { name: "pv-bench", version: "1.0.0" }
  }
}

/** The headers an MCP 2026-07-28 client sends with a `tools/call` of resolve_trust (the server checks them against the body). */
export const mcp2026Headers = { "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "resolve_trust" }

/**
 * The JSON-RPC id of a benchmark's MCP call: `[<id>]`, which the load generator replaces with a fresh value per
 * request (load with `idReplacement: true`), as an SDK client numbers its requests; a fixed id would measure a
 * server that answers a repeated call from what it kept.
 */
export const McpRequestId = "[<id>]"

/** An MCP 2025-06-18 `tools/call` of resolve_trust (load it with `idReplacement: true`). */
export const mcp2025Body = (publicId: string) =>
  JSON.stringify({ jsonrpc: "2.0", id: McpRequestId, method: "tools/call", params: { name: "resolve_trust", arguments: { public_id: publicId } } })

/** An MCP 2026-07-28 `tools/call` of resolve_trust, with the per-request `_meta` an SDK client sends (load it with `idReplacement: true`). */
export const mcp2026Body = (publicId: string) => JSON.stringify({
  jsonrpc: "2.0",
  id: McpRequestId,
  method: "tools/call",
  params: {
    name: "resolve_trust",
    arguments: { public_id: publicId },
    _meta: {
      "io.modelcontextprotocol/protocolVersion": "2026-07-28",
      "io.modelcontextprotocol/clientInfo": { name: "bench", version: "1.0.0" },
      "io.modelcontextprotocol/clientCapabilities": {}
    }
  }
})
