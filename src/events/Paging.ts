/** docs/API.md §4.3: page sizes of the event feed (pure, so the API definition loads no service module). */
export const DefaultPageSize = 100
export const MaxPageSize = 1000
