/**
 * What every parser and verifier returns: the value, or why the input was refused. Verifiers never
 * throw on what came over the wire; a refusal is data the caller reports (or the page shows).
 */
export type Checked<A> =
  | { readonly ok: true; readonly value: A }
  | { readonly ok: false; readonly detail: string }

export const accept = <A>(value: A): Checked<A> => ({ ok: true, value })

export const refuse = <A = never>(detail: string): Checked<A> => ({ ok: false, detail })
