/** One Server-Sent Events message as the stream sent it. */
export interface SseMessage {
  readonly id?: string
  readonly event?: string
  readonly data?: string
  /** Comment lines (`: …`), e.g. heartbeats. */
  readonly comments: ReadonlyArray<string>
  readonly at: number
}

export interface SseClient {
  readonly status: number
  readonly headers: Headers
  readonly messages: Array<SseMessage>
  /** Resolves once `predicate` holds over the messages received so far (checked on each new one). */
  readonly until: (predicate: (messages: ReadonlyArray<SseMessage>) => boolean, timeoutMs?: number) => Promise<ReadonlyArray<SseMessage>>
  /** Resolves when the server ends the stream: "ended" cleanly, or "error". */
  readonly ended: Promise<"ended" | "error">
  readonly close: () => void
  /** The body of a refusal (problem+json), when the status is not 200. */
  readonly text: string
}

/** Opens a stream with fetch and parses its messages as they arrive (the text/event-stream format). */
export const openSse = async (url: string, headers: Record<string, string>): Promise<SseClient> => {
  const abort = new AbortController()
  const response = await fetch(url, { headers: { accept: "text/event-stream", ...headers }, signal: abort.signal })
  const messages: Array<SseMessage> = []
  const listeners = new Set<() => void>()
  if (response.status !== 200) {
    const text = await response.text()
    return {
      status: response.status, headers: response.headers, messages, text, close: () => abort.abort(), ended: Promise.resolve("ended"),
      until: () => Promise.reject(new Error(`stream refused: ${response.status} ${text}`))
    }
  }
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  const ended = (async (): Promise<"ended" | "error"> => {
    let buffer = ""
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) return "ended"
        buffer += decoder.decode(value, { stream: true })
        let cut: number
        while ((cut = buffer.indexOf("\n\n")) !== -1) {
          const block = buffer.slice(0, cut)
          buffer = buffer.slice(cut + 2)
          const message: { id?: string; event?: string; data?: string; comments: Array<string>; at: number } = { comments: [], at: Date.now() }
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) message.comments.push(line.slice(1).trim())
            else {
              const colon = line.indexOf(":")
              const field = line.slice(0, colon)
              const value = line.slice(colon + 1).replace(/^ /, "")
              if (field === "id" || field === "event") message[field] = value
              else if (field === "data") message.data = message.data === undefined ? value : `${message.data}\n${value}`
            }
          }
          messages.push(message)
          for (const listener of [...listeners]) listener()
        }
      }
    } catch {
      return abort.signal.aborted ? "ended" : "error"
    } finally {
      for (const listener of [...listeners]) listener()
    }
  })()
  return {
    status: response.status,
    headers: response.headers,
    messages,
    text: "",
    ended,
    close: () => abort.abort(),
    until: (predicate, timeoutMs = 5_000) =>
      new Promise((resolve, reject) => {
        const check = () => {
          if (predicate(messages)) {
            listeners.delete(check)
            clearTimeout(timer)
            resolve(messages)
          }
        }
        const timer = setTimeout(() => {
          listeners.delete(check)
          reject(new Error(`stream: condition not met after ${timeoutMs} ms; ${messages.length} messages`))
        }, timeoutMs)
        listeners.add(check)
        check()
      })
  }
}

/** The events (parsed `data`) of the messages that carry one. */
export const eventsOf = (messages: ReadonlyArray<SseMessage>) =>
  messages.filter((m) => m.event !== undefined).map((m) => JSON.parse(m.data!) as { sequence: number; event_id: string })
