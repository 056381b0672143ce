// Types for app.js of ./verify.js, which `npm run build` bundles from src/web/browser.ts (see src/web/Bundle.ts).
export * from "../browser.js"
