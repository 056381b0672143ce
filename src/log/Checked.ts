/**
 * What every parser and verifier of the log returns: the value, or why the input was refused.
 * Verifiers never throw on what came over the wire; a refusal is data the caller reports.
 * One definition with the verifiers the page shares.
 */
export { accept, refuse, type Checked } from "../verify/Checked.js"
