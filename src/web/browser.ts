/**
 * The entry of the page's one bundled module, /web/verify.js (app.js imports it as ./verify.js): the
 * verifier (src/verify through ./verifier.ts, with WebCrypto) and the live stream's parser and check.
 */
export * from "./verifier.js"
export * from "./live.js"
