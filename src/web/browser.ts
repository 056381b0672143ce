/**
 * The entry of the page's verifier module, /web/verify.js (the page, app.ts bundled as /web/app.js, imports it as ./verify.js): the
 * verifier (src/verify through ./verifier.ts, with WebCrypto), the live stream's parser and check, and how pasted
 * or dropped evidence is read (./evidenceInput.ts).
 */
export * from "./verifier.js"
export * from "./live.js"
export * from "./evidenceInput.js"
