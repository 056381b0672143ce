import { Result } from "effect"

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

/**
 * `f`'s successes, remembered for the last `capacity` distinct keys (the oldest is forgotten first); a
 * failure is worked out afresh every time, and an input without a key (`keyOf` gives undefined) is never
 * remembered. For checks that are pure functions of what the key names, read on every request from values
 * clients repeat: a remembered success is the very value `f` gave (callers treat it as immutable).
 */
export const rememberSuccesses = <X, A, E>(
  keyOf: (input: X) => string | undefined,
  f: (input: X) => Result.Result<A, E>,
  capacity = 256
): ((input: X) => Result.Result<A, E>) => {
  const known = new Map<string, A>()
  return (input) => {
    const key = keyOf(input)
    if (key === undefined) return f(input)
    if (known.has(key)) return Result.succeed(known.get(key) as A)
    const result = f(input)
    if (Result.isSuccess(result)) {
      if (known.size >= capacity) known.delete(known.keys().next().value!)
      known.set(key, result.success)
    }
    return result
  }
}

/**
 * A bounded map that forgets the least recently used entry first (a read or a write makes an entry the most
 * recent). Each holder makes its own (a service's state, not the module's).
 */
export const lru = <V>(capacity: number) => {
  const map = new Map<string, V>()
  return {
    get: (key: string): V | undefined => {
      const value = map.get(key)
      if (value !== undefined) {
        map.delete(key)
        map.set(key, value)
      }
      return value
    },
    set: (key: string, value: V): void => {
      if (!map.delete(key) && map.size >= capacity) map.delete(map.keys().next().value!)
      map.set(key, value)
    }
  }
}
