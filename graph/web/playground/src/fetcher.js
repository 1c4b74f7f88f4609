// The GraphiQL fetcher: queries and mutations go over HTTP POST, subscriptions
// over WebSocket with the graphql-transport-ws protocol (graphql-ws client).
// The headers typed in GraphiQL's headers editor travel as HTTP headers, and
// as the connection_init payload on the WebSocket, where browsers cannot set
// headers: {"Authorization": "Bearer …"} reaches the server either way.

import { getOperationAST, parse } from 'graphql';
import { createClient } from 'graphql-ws';

/**
 * createFetcher returns a GraphiQL fetcher for the given absolute URLs.
 * One WebSocket client is kept per distinct set of headers: changing the
 * token in the headers editor opens a fresh connection with the new payload.
 */
export function createFetcher({ http, ws }) {
  let socket = { key: '', client: null };

  function wsClient(headers) {
    const key = JSON.stringify(headers);
    if (socket.client && socket.key === key) return socket.client;
    if (socket.client) socket.client.dispose();
    socket = {
      key,
      client: createClient({
        url: ws,
        connectionParams: headers,
        lazy: true,
        retryAttempts: 0,
      }),
    };
    return socket.client;
  }

  return function fetcher(params, opts = {}) {
    const headers = plainHeaders(opts.headers);
    if (isSubscription(params)) {
      return subscribe(wsClient(headers), params);
    }
    return post(http, params, headers);
  };
}

function plainHeaders(headers) {
  const out = {};
  if (headers && typeof headers === 'object') {
    for (const [name, value] of Object.entries(headers)) {
      if (value !== undefined && value !== null) out[name] = String(value);
    }
  }
  return out;
}

// isSubscription parses the query text itself rather than trusting
// opts.documentAST: GraphiQL updates that AST a moment after each edit, so a
// query run right after typing would be routed by its previous text.
function isSubscription(params) {
  let doc;
  try {
    doc = parse(params.query);
  } catch {
    return false; // let the server report the syntax error
  }
  const op = getOperationAST(doc, params.operationName || undefined);
  return op !== null && op !== undefined && op.operation === 'subscription';
}

async function post(url, params, headers) {
  const res = await fetch(url, {
    method: 'POST',
    credentials: 'same-origin',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json, application/json;q=0.9',
      ...headers,
    },
    body: JSON.stringify({
      query: params.query,
      variables: params.variables,
      operationName: params.operationName || undefined,
    }),
  });
  const text = await res.text();
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`HTTP ${res.status} ${res.statusText}: ${text.slice(0, 500)}`);
  }
}

async function* subscribe(client, params) {
  try {
    yield* client.iterate({
      query: params.query,
      variables: params.variables,
      operationName: params.operationName || undefined,
    });
  } catch (err) {
    throw socketError(err);
  }
}

// graphql-ws rejects with the raw CloseEvent when the server closes the
// socket (for example 4403 Forbidden on a bad token); GraphiQL would print
// it as an empty object, so give it a message.
function socketError(err) {
  if (err && typeof err === 'object' && 'code' in err && 'reason' in err && !(err instanceof Error)) {
    return new Error(`WebSocket closed: ${err.code} ${err.reason || ''}`.trim());
  }
  if (Array.isArray(err)) {
    return new Error(err.map((e) => (e && e.message) || String(e)).join('\n'));
  }
  return err;
}
