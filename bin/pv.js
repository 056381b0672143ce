#!/usr/bin/env node
// The `pv` command runs the compiled CLI (`npm run build`; `npm pack` builds it too), the same code `npm start` runs.
import { existsSync } from "node:fs"

const compiled = new URL("../dist/src/cli/main.js", import.meta.url)
if (!existsSync(compiled)) {
  console.error("pv: the compiled CLI is missing: run `npm run build` first (`npm run pv -- …` builds and runs it).")
  process.exit(1)
}
await import(compiled.href)
