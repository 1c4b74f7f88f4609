// Runs graphql-http's server audits against the GraphQL endpoint given as
// the first argument and prints one JSON line per audit:
// {"id", "name", "status": "ok"|"warn"|"error", "reason"}.
// audit_test.go (one folder up) starts the server and judges the results.
import { serverAudits } from 'graphql-http';

const url = process.argv[2];
if (!url) {
  console.error('usage: node audit.mjs http://127.0.0.1:PORT/graphql');
  process.exit(2);
}
for (const audit of serverAudits({ url, fetchFn: fetch })) {
  const result = await audit.fn();
  const line = { id: result.id, name: result.name, status: result.status };
  if (result.status !== 'ok') {
    line.reason = result.reason;
    if (result.response) {
      line.response = { status: result.response.status, body: await result.response.text().catch(() => '') };
    }
  }
  console.log(JSON.stringify(line));
}
