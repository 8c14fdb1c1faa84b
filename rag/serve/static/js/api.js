// The JSON API (README, "rag serve"): errors come back as {"error": "..."}.

// An error with the HTTP status it came with (a 503, the queue full, can be answered with a recorded run: playback.js).
function failed(message, status) {
  const error = new Error(message);
  error.status = status;
  return error;
}

export async function getJSON(url, options) {
  const response = await fetch(url, options);
  let body;
  try { body = await response.json(); } catch { body = { error: `HTTP ${response.status}` }; }
  if (!response.ok) throw failed(body.error || `HTTP ${response.status}`, response.status);
  return body;
}

// Server-sent events over fetch (EventSource cannot show a 503's message and reconnects on its own, which
// would ask the question again). With a body, a POST of it as JSON (a conversation need not fit in a URL). Calls
// onEvent(kind, data) for each event until the stream ends.
export async function streamEvents(url, onEvent, signal, body) {
  const response = await fetch(url, body === undefined ? { signal, headers: { accept: "text/event-stream" } }
    : { signal, method: "POST", body: JSON.stringify(body),
        headers: { accept: "text/event-stream", "content-type": "application/json" } });
  if (!response.ok) {
    let message = `HTTP ${response.status}`;
    try { message = (await response.json()).error || message; } catch { /* not JSON */ }
    const retry = response.headers.get("retry-after");
    throw failed(retry ? `${message} (retry after ${retry} s)` : message, response.status);
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let kind = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) kind = line.slice(7);
        else if (line.startsWith("data: ")) data.push(line.slice(6));
      }
      if (data.length) onEvent(kind, JSON.parse(data.join("\n")));
    }
  }
}
