// Entry point of the Switchyard playground: GraphiQL wired to the server's
// GraphQL endpoint (HTTP) and subscription endpoint (graphql-transport-ws).

import './workers.js';
// GraphiQL's stylesheets one by one rather than graphiql/style.css, which
// repeats Monaco's CSS (already imported by Monaco's own modules) and inlines
// the Roboto font (260 kB); the UI uses the system's sans-serif instead.
// Fira Code stays: Monaco is configured to render code in it.
import '@graphiql/react/font/fira-code.css';
import '@graphiql/react/style.css';
import '@graphiql/plugin-doc-explorer/style.css';
import '@graphiql/plugin-history/style.css';
import 'graphiql/graphiql.css';
import './playground.css';
import { GraphiQL } from 'graphiql';
import { createRoot } from 'react-dom/client';
import { endpoints, readConfig } from './config.js';
import { createFetcher } from './fetcher.js';

const authTemplate = '{\n  "Authorization": "Bearer <token>"\n}';

const config = readConfig();
const fetcher = createFetcher(endpoints(config));

createRoot(document.getElementById('graphiql')).render(
  <GraphiQL
    fetcher={fetcher}
    defaultQuery={config.defaultQuery || undefined}
    defaultHeaders={config.authRequired ? authTemplate : undefined}
    initialHeaders={config.authRequired ? authTemplate : undefined}
    defaultEditorToolsVisibility={config.authRequired ? 'headers' : undefined}
    shouldPersistHeaders={false}
  >
    <GraphiQL.Logo>{config.title}</GraphiQL.Logo>
  </GraphiQL>,
);
