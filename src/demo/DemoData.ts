import { createHash } from "node:crypto"
import type { DeterminationBody } from "../domain/Determination.js"

const DAY = 86_400_000
const hex = (seed: string) => createHash("sha256").update(seed).digest("hex")
const iso = (ms: number) => new Date(ms).toISOString()

interface Shape {
  readonly publicId: string
  readonly subject: string
  readonly tier: DeterminationBody["tier"]
  readonly eligible: boolean
  /** as_of and valid_until relative to now, in days: chosen to land in each freshness state. */
  readonly asOfDays: number
  readonly validDays: number
  readonly why: ReadonlyArray<string>
  readonly whyNot: ReadonlyArray<string>
}

const shapes: ReadonlyArray<Shape> = [
  { publicId: "DET-V1-ACME-ROBOTICS-0001", subject: "sub_acme_robotics", tier: "T3", eligible: true, asOfDays: -10, validDays: 90,
    why: ["Registry identity verified", "Two independent audits within 12 months"], whyNot: ["No on-site inspection for T4"] },
  { publicId: "DET-V1-NORTHWIND-0002", subject: "sub_northwind", tier: "T2", eligible: true, asOfDays: -80, validDays: 90,
    why: ["Registry identity verified", "One audit within 12 months"], whyNot: ["Second independent audit missing"] },
  { publicId: "DET-V1-GLOBEX-0003", subject: "sub_globex", tier: "T1", eligible: true, asOfDays: -100, validDays: 60,
    why: ["Self-declared identity matched to registry"], whyNot: ["No audit evidence", "Beneficial ownership undisclosed"] },
  { publicId: "DET-V1-INITECH-0004", subject: "sub_initech", tier: "T0", eligible: false, asOfDays: -400, validDays: 120,
    why: ["Subject known only by name"], whyNot: ["Identity not verified"] },
  { publicId: "QUAL-V1-ACME-ROBOTICS-ISO27001", subject: "sub_acme_robotics", tier: "T4", eligible: true, asOfDays: -5, validDays: 365,
    why: ["ISO/IEC 27001 certificate verified with the issuing body", "Scope covers all production sites"], whyNot: [] },
  { publicId: "QUAL-V1-NORTHWIND-SOC2", subject: "sub_northwind", tier: "T2", eligible: true, asOfDays: -30, validDays: 180,
    why: ["SOC 2 Type I report reviewed"], whyNot: ["Type II report not yet available"] }
]

/** A handful of realistic determinations across tiers and freshness states, dated relative to `nowMs`. */
export const demoDeterminations = (nowMs: number): ReadonlyArray<{ publicId: string; body: DeterminationBody }> =>
  shapes.map((shape) => {
    const asOf = nowMs + shape.asOfDays * DAY
    return {
      publicId: shape.publicId,
      body: {
        subject: {
          subject_id: shape.subject,
          physical_subject_id: `phys_${shape.subject.slice(4)}`,
          identity_state: shape.tier === "T0" ? "UNVERIFIED" : "VERIFIED"
        },
        tier: shape.tier,
        eligible: shape.eligible,
        why_this_tier: shape.why,
        why_not_higher: shape.whyNot,
        claims: [
          { claim_id: `${shape.publicId}:legal-name`, type: "legal_name", value: shape.subject.slice(4).replace(/_/g, " "), scope: "identity" },
          { claim_id: `${shape.publicId}:tier`, type: "assurance_tier", value: shape.tier, scope: "assurance" },
          { claim_id: `${shape.publicId}:audits`, type: "audit_count", value: shape.why.length, scope: "assurance" }
        ],
        evidence: shape.why.map((reason, i) => ({
          evidence_id: `ev_${shape.publicId.toLowerCase()}_${i + 1}`,
          kind: i === 0 ? "registry_extract" : "audit_report",
          digest: hex(`${shape.publicId}:${reason}`),
          collected_at: iso(asOf - (i + 1) * DAY),
          source: i === 0 ? "companies-registry" : "independent-auditor"
        })),
        allowed_claims: ["identity", "assurance"],
        limitations: ["Determination covers the named legal entity only"],
        prohibited_inferences: ["credential_issued", "financial_standing"],
        lifecycle_state: "NOT_ISSUED",
        as_of: iso(asOf),
        valid_until: iso(asOf + shape.validDays * DAY),
        engine: { name: "pv-determination-engine", version: "1.4.2" },
        purchase: { plan: "demo", reference: `demo-${shape.publicId.toLowerCase()}` }
      }
    }
  })
