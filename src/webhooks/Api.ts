import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"

export const WebhookSigningPublicKey = Schema.Struct({
  public_key: Schema.String.annotate({ description: "whpk_ + standard base64 of the 32-byte raw Ed25519 public key" }),
  kid: Schema.String.annotate({ description: "First 16 hex of SHA-256 of the raw public key" })
}).annotate({
  identifier: "WebhookSigningPublicKey",
  examples: [{ public_key: "whpk_rL6Cz8i3kgKDL0+Ovkaej5vb3TLYLjMtBXUu/UbnSpY=", kid: "5f1dc5e34a6f2e0b" }]
})
export type WebhookSigningPublicKey = typeof WebhookSigningPublicKey.Type

export class WebhooksApi extends HttpApiGroup.make("webhooks")
  .add(
    HttpApiEndpoint.get("signingKey", "/webhooks/signing-key", { success: WebhookSigningPublicKey })
      .annotate(OpenApi.Summary, "The public key of v1a webhook signatures (no key needed)")
      .annotate(OpenApi.Description,
        "Deliveries of subscriptions made with signature_scheme v1a carry webhook-signature: v1a,<base64 Ed25519 signature over " +
        "`<webhook-id>.<webhook-timestamp>.<body>`>, made with this key (Standard Webhooks). Fetch it over TLS and pin it; " +
        "after the operator rotates the key (PV_WEBHOOK_SIGNING_KEY) this answers the new one.")
  )
  .prefix("/api/v1")
  .annotate(OpenApi.Title, "Webhook signing key") {}
