// Reads the page configuration that the Go handler injects into index.html
// and resolves the GraphQL endpoints against the page's own address, so the
// dashboard works behind any host name, port, path prefix or TLS proxy.

/** What the server tells the page (see Options in ../dashboard.go). */
export interface PageConfig {
  title: string;
  endpoint: string;
  subscriptionEndpoint: string;
  authRequired: boolean;
}

const defaults: PageConfig = {
  title: 'Switchyard',
  endpoint: '/graphql',
  subscriptionEndpoint: '',
  authRequired: false,
};

/**
 * readConfig parses <script id="switchyard-config">. A missing or malformed
 * blob (the page opened straight from dist/) falls back to the defaults.
 */
export function readConfig(doc: Document = document): PageConfig {
  const node = doc.getElementById('switchyard-config');
  const text = node?.textContent?.trim() ?? '';
  let injected: Partial<PageConfig> = {};
  if (text !== '' && text !== '{{CONFIG}}') {
    try {
      injected = JSON.parse(text) as Partial<PageConfig>;
    } catch (err) {
      console.warn('switchyard: ignoring malformed page config', err);
    }
  }
  return { ...defaults, ...injected };
}

/** Absolute endpoints: HTTP for queries and mutations, ws(s) for subscriptions. */
export function endpoints(config: PageConfig, base: string = window.location.href): { http: string; ws: string } {
  const http = new URL(config.endpoint || defaults.endpoint, base);
  const ws = new URL(config.subscriptionEndpoint || http.href, base);
  if (ws.protocol === 'http:') ws.protocol = 'ws:';
  if (ws.protocol === 'https:') ws.protocol = 'wss:';
  return { http: http.href, ws: ws.href };
}
