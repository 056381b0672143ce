// Moved to src/domain/EventChain.ts (pure; the client verifies with it). Kept for the transition: delete once
// test/** and bench/** import from domain.
export * from "../domain/EventChain.js"
