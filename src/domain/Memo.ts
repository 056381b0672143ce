/**
 * A pure function of short text, remembered for the last `capacity` distinct inputs (the oldest is
 * forgotten first). For rules read on every request from values clients repeat (a header's value, a
 * tool's arguments): the answer is the function's own, computed once per distinct input. Each holder makes
 * its own (a service's state, not the module's).
 */
export const memoByText = <A>(f: (text: string) => A, capacity = 256): ((text: string) => A) => {
  const known = new Map<string, A>()
  return (text) => {
    const found = known.get(text)
    if (found !== undefined || known.has(text)) return found as A
    const value = f(text)
    if (known.size >= capacity) known.delete(known.keys().next().value!)
    known.set(text, value)
    return value
  }
}
