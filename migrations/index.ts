/**
 * Every migration, in order. Add a line per new `NNNN_name.ts` file; a file is never edited after it lands.
 * Static imports (rather than a directory scan) let the same list load under tsx, vitest and a bundle.
 */
export const migrations: Record<string, () => Promise<unknown>> = {
  "0001_foundation.ts": () => import("./0001_foundation.js"),
  "0002_receipts.ts": () => import("./0002_receipts.js"),
  "0003_events.ts": () => import("./0003_events.js"),
  "0004_rate_limits.ts": () => import("./0004_rate_limits.js"),
  "0005_transparency_log.ts": () => import("./0005_transparency_log.js"),
  "0006_webhook_subscriptions.ts": () => import("./0006_webhook_subscriptions.js"),
  "0007_witness.ts": () => import("./0007_witness.js"),
  "0008_webhook_url_probe.ts": () => import("./0008_webhook_url_probe.js"),
  "0009_webhook_origin_probe.ts": () => import("./0009_webhook_origin_probe.js"),
  "0010_webhook_attempts.ts": () => import("./0010_webhook_attempts.js"),
  "0011_subscription_signature_scheme.ts": () => import("./0011_subscription_signature_scheme.js"),
  "0012_subscription_disabled_reason.ts": () => import("./0012_subscription_disabled_reason.js"),
  "0013_trust_read_leases.ts": () => import("./0013_trust_read_leases.js")
}
