// A minimal Switchyard agent in TypeScript: it submits a small DAG of
// browser tasks as one batch (submitTasks, items naming each other by key in
// dependsOn) and follows it live over the taskEventFeed subscription
// (graphql-ws, the graphql-transport-ws protocol) until every task has
// ended, then prints each task's result.
//
//   open (navigate) ─┬─▶ title (evaluate document.title) ─┐
//                    └─▶ text  (text of the page)  ────────┴─▶ shot (screenshot)
//
// Environment: SWITCHYARD_SERVER (default http://127.0.0.1:8080),
// SWITCHYARD_TOKEN (sent as `Authorization: Bearer` on HTTP and in
// connection_init), URL (the page to visit, default https://example.com).

import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';

const server = (process.env.SWITCHYARD_SERVER ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
const endpoint = `${server}/graphql`;
const token = process.env.SWITCHYARD_TOKEN ?? '';
const pageURL = process.env.URL ?? 'https://example.com';
const agentId = process.env.AGENT ?? 'example-ts-agent';
const auth: Record<string, string> = token ? { Authorization: `Bearer ${token}` } : {};

const TERMINAL = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED', 'REJECTED', 'EXPIRED']);

interface GraphQLError {
  message: string;
  extensions?: { code?: string };
}

/** Runs a query or mutation over HTTP; GraphQL errors are thrown. */
async function gql<T>(query: string, variables: Record<string, unknown> = {}): Promise<T> {
  const res = await fetch(endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...auth },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as { data?: T; errors?: GraphQLError[] };
  if (body.errors?.length) {
    const e = body.errors[0]!;
    throw new Error(`${e.extensions?.code ?? 'ERROR'}: ${e.message}`);
  }
  return body.data as T;
}

/** The batch: four browser tasks in one session, naming each other by key. */
function dag(session: string) {
  const task = (action: Record<string, unknown>, ...dependsOn: string[]) => ({
    agentId,
    sessionKey: session,
    action,
    labels: [{ key: 'example', value: 'ts-agent' }],
    ...(dependsOn.length ? { dependsOn } : {}),
  });
  return [
    { key: 'open', task: task({ kind: 'navigate', params: { url: pageURL } }) },
    { key: 'title', task: task({ kind: 'evaluate', params: { expression: 'document.title' } }, 'open') },
    { key: 'text', task: task({ kind: 'text' }, 'open') },
    { key: 'shot', task: task({ kind: 'screenshot' }, 'title', 'text') },
  ];
}

interface FeedEvent {
  seq: number;
  kind: string;
  taskId?: string;
  from?: string;
  to?: string;
  reason?: string;
}

async function main(): Promise<number> {
  // 1. Where the event stream stands: following from here after the submit
  // cannot miss the batch's first events.
  const { stats } = await gql<{ stats: { lastSeq: number } }>('{ stats { lastSeq } }');

  // 2. Submit the DAG as one batch.
  const session = `${agentId}-${Date.now()}`;
  const { submitTasks } = await gql<{
    submitTasks: {
      batchId: string;
      items: { key: string; task: { id: string } | null; error: { code: string; message: string } | null }[];
    };
  }>(
    `mutation($in: SubmitTasksInput!) { submitTasks(input: $in) { batchId items { key task { id } error { code message } } } }`,
    { in: { items: dag(session) } },
  );
  const keyOf = new Map<string, string>();
  for (const it of submitTasks.items) {
    if (it.error || !it.task) throw new Error(`item ${it.key} refused: ${it.error?.code}: ${it.error?.message}`);
    keyOf.set(it.task.id, it.key);
    console.log(`submitted ${it.key.padEnd(5)} ${it.task.id}`);
  }
  console.log(`batch ${submitTasks.batchId}: following it live`);

  // 3. Follow the batch's events until every task has ended. When the
  // socket drops, subscribe again after the last seq seen.
  const client: Client = createClient({
    url: endpoint.replace(/^http/, 'ws'),
    webSocketImpl: WebSocket,
    connectionParams: auth,
    retryAttempts: 0,
  });
  const ended = new Map<string, string>();
  let after = stats.lastSeq;
  while (ended.size < keyOf.size) {
    try {
      const events = client.iterate<{ taskEventFeed: { events: FeedEvent[]; lastSeq: number } }>({
        query: `subscription($b: ID!, $after: Int64) { taskEventFeed(filter: {batchId: $b}, after: $after) { events lastSeq } }`,
        variables: { b: submitTasks.batchId, after },
      });
      for await (const msg of events) {
        if (msg.errors?.length) throw new Error(msg.errors[0]!.message);
        const feed = msg.data!.taskEventFeed;
        for (const e of feed.events) {
          if (e.kind === 'LAGGED') throw new Error('fell behind the server (LAGGED)');
          if (e.kind !== 'STATE' || !e.taskId) continue;
          console.log(`${String(e.seq).padStart(6)} ${keyOf.get(e.taskId)?.padEnd(5)} ${e.from ?? '·'} → ${e.to} ${e.reason ?? ''}`);
          if (e.to && TERMINAL.has(e.to)) ended.set(e.taskId, e.to);
        }
        after = feed.lastSeq;
        if (ended.size === keyOf.size) break; // ends the subscription
      }
    } catch (err) {
      console.log(`connection lost (${err instanceof Error ? err.message : String(err)}): resuming after seq ${after}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  await client.dispose();

  // 4. Read the results.
  const { batch } = await gql<{ batch: { tasks: { nodes: { id: string; state: string; result: unknown; error: string | null }[] } } }>(
    `query($id: ID!) { batch(id: $id) { tasks(first: 10) { nodes { id state result error } } } }`,
    { id: submitTasks.batchId },
  );
  let ok = true;
  for (const t of batch.tasks.nodes) {
    ok &&= t.state === 'SUCCEEDED';
    const result = JSON.stringify(t.result) ?? '';
    console.log(`${keyOf.get(t.id)?.padEnd(5)} ${t.state.padEnd(9)} ${result.slice(0, 100)}${t.error ?? ''}`);
  }
  return ok ? 0 : 2;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error('agent:', err instanceof Error ? err.message : err);
    process.exit(1);
  },
);
