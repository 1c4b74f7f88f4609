// Reads the page configuration that the Go handler injects into index.html
// and resolves the GraphQL endpoints against the address the page was served
// from, so the playground works behind any host name, port or TLS proxy.

const defaults = {
  title: 'Switchyard',
  endpoint: '/graphql',
  subscriptionEndpoint: '',
  defaultQuery: '',
  authRequired: false,
};

/**
 * readConfig parses the JSON blob in <script id="switchyard-config">.
 * A missing or malformed blob falls back to the defaults, so opening the
 * built page straight from dist/ still shows an editor.
 */
export function readConfig(doc = document) {
  const node = doc.getElementById('switchyard-config');
  let injected = {};
  const text = node ? node.textContent.trim() : '';
  // '{{CONFIG}}' is the build's placeholder, left as is when the page is
  // opened without the Go handler.
  if (text !== '' && text !== '{{CONFIG}}') {
    try {
      injected = JSON.parse(text);
    } catch (err) {
      console.error('switchyard: ignoring malformed page config', err);
    }
  }
  return { ...defaults, ...injected };
}

/**
 * endpoints turns the configured (possibly relative) endpoints into absolute
 * URLs: HTTP for queries and mutations, ws(s) for subscriptions.
 */
export function endpoints(config, base = window.location.href) {
  const http = new URL(config.endpoint || defaults.endpoint, base);
  const ws = new URL(config.subscriptionEndpoint || http.href, base);
  if (ws.protocol === 'http:') ws.protocol = 'ws:';
  if (ws.protocol === 'https:') ws.protocol = 'wss:';
  return { http: http.href, ws: ws.href };
}
