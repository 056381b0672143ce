import * as Effect from "effect/Effect"

/** A command's failure: its message goes to stderr, and the process exits 1. */
export const fail = (message: string) => Effect.fail(new Error(message))

/** A command's result on stdout: text as-is, anything else as indented JSON. */
export const print = (value: unknown) => Effect.sync(() => console.log(typeof value === "string" ? value : JSON.stringify(value, null, 2)))
