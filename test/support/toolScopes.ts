/** docs/API.md §12.4, restated as the tests' expectation: each MCP tool and the scope it needs. */
export const DocumentedToolScopes: Readonly<Record<string, string>> = {
  resolve_trust: "trust:read",
  resolve_subject: "trust:read",
  compare_current: "trust:read",
  resolve_lifecycle: "trust:read",
  evaluate_actionability: "actionability:read",
  create_reliance_receipt: "receipt:write",
  get_reliance_receipt: "receipt:read",
  subscribe_trust_changes: "subscription:write"
}
