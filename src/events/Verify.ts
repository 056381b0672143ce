// Moved to src/domain/EventVerify.ts (pure; the client verifies with it). Kept for the transition: delete once
// test/** and bench/** import from domain.
export * from "../domain/EventVerify.js"
