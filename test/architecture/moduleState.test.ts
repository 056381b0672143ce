import { describe, expect, it } from "@effect/vitest"
import ts from "typescript"
import { readSources } from "../support/folderGraph.js"

/**
 * Module-level bindings of src/ that may change after the module loaded, each kept on purpose, by
 * `file:name`, with why (docs/ARCHITECTURE.md, "Services"): state belongs to the layer that owns it.
 */
const Kept: ReadonlyMap<string, string> = new Map([
  ["api/GroupApi.ts:groupApis", "memo of a pure function of each (immutable) group, and its identity: one HttpApi per group"],
  ["log/Merkle.ts:nodeInput", "scratch input of one node hash, rewritten and hashed synchronously (no call interleaves)"],
  ["log/TileTree.ts:placeholder", "the all-zero hash a dry run passes around; nothing writes into it"],
  ["verify/FastJcs.ts:plans", "memo of a pure function (a key list's JCS order), 33 entries at most; verify/ is a library with no layers"],
  ["verify/NodeCrypto.ts:importedArrays", "memo of a pure function (raw key → KeyObject), weak; verify/ is a library with no layers"],
  ["verify/NodeCrypto.ts:imported", "memo of a pure function (raw key → KeyObject), at most 256; verify/ is a library with no layers"],
  ["web/verifier.ts:importedKeys", "the page's memo of imported keys (browser code: the module lives as long as the page)"],
  ["web/app.ts:following", "the page's one piece of state besides its DOM (browser code: the module lives as long as the page)"]
])

const MutableCollections = new Set(["Map", "Set", "WeakMap", "WeakSet", "Array"])
const TypedArrays = /^(?:Uint8|Uint8Clamped|Int8|Uint16|Int16|Uint32|Int32|Float32|Float64|BigInt64|BigUint64)Array$/

/** Why a top-level declaration can change after load, or undefined when it cannot (as far as its form says). */
const mutableKind = (list: ts.VariableDeclarationList, declaration: ts.VariableDeclaration, source: ts.SourceFile): string | undefined => {
  if ((list.flags & ts.NodeFlags.Const) === 0) return (list.flags & ts.NodeFlags.Let) !== 0 ? "let" : "var"
  const init = declaration.initializer
  if (init === undefined) return undefined
  const declared = declaration.type?.getText(source) ?? ""
  if (/^Readonly|^readonly /.test(declared)) return undefined
  if (ts.isNewExpression(init) && ts.isIdentifier(init.expression)) {
    const made = init.expression.text
    if (MutableCollections.has(made) || TypedArrays.test(made)) return `new ${made}`
  }
  if (ts.isArrayLiteralExpression(init)) return "array"
  return undefined
}

/** Every top-level binding of src/ that can change after load: `let`/`var`, or a mutable collection. */
const topLevelMutable = (sources: ReadonlyMap<string, string>): Map<string, string> => {
  const found = new Map<string, string>()
  for (const [path, text] of sources) {
    const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true)
    for (const statement of source.statements) {
      if (!ts.isVariableStatement(statement)) continue
      for (const declaration of statement.declarationList.declarations) {
        const kind = mutableKind(statement.declarationList, declaration, source)
        if (kind !== undefined) found.set(`${path}:${declaration.name.getText(source)}`, kind)
      }
    }
  }
  return found
}

const sources = readSources("src")

describe("module-level state in src/ (services keep theirs in their layer)", () => {
  it("has no top-level mutable binding but the ones kept on purpose", () => {
    const unexpected = [...topLevelMutable(sources)].filter(([key]) => !Kept.has(key)).map(([key, kind]) => `${key} (${kind})`)
    expect(unexpected).toEqual([])
  })

  it("keeps no allowance for a binding that is gone", () => {
    const found = topLevelMutable(sources)
    expect([...Kept.keys()].filter((key) => !found.has(key))).toEqual([])
  })

  it("finds a top-level let, var, mutable collection and typed array, and not their readonly or local forms", () => {
    const probe = new Map([[
      "probe.ts",
      [
        "let a = 0",
        "var b = 1",
        "const c = new Map<string, number>()",
        "const d = new WeakMap<object, number>()",
        "const e = [1, 2]",
        "const f = new Uint8Array(4)",
        "const g: ReadonlySet<string> = new Set()",
        "const h: ReadonlyArray<number> = [1]",
        "const i = () => { let local = 0; return local++ }",
        "export const j = new TextEncoder()"
      ].join("\n")
    ]])
    expect(Object.fromEntries(topLevelMutable(probe))).toEqual({
      "probe.ts:a": "let",
      "probe.ts:b": "var",
      "probe.ts:c": "new Map",
      "probe.ts:d": "new WeakMap",
      "probe.ts:e": "array",
      "probe.ts:f": "new Uint8Array"
    })
  })
})
