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

import type * as G from './graphql.generated.js';

const server = (process.env.SWITCHYARD_SERVER ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
const endpoint = `${server}/graphql`;
const token = process.env.SWITCHYARD_TOKEN ?? '';
const pageURL = process.env.URL ?? 'https://example.com';
const agentId = process.env.AGENT ?? 'example-ts-agent';
const auth: Record<string, string> = token ? { Authorization: `Bearer ${token}` } : {};

const TERMINAL = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED', 'REJECTED', 'EXPIRED']);

// The operations, as /* GraphQL */ strings: `npm run build` runs
// graphql-codegen over them first, which validates them against the schema
// (../../graph/schema) and writes the types of their variables and answers
// to graphql.generated.ts; the build fails when one no longer validates.

const STATS = /* GraphQL */ `
  query AgentStats { stats { lastSeq } }`;

const SUBMIT = /* GraphQL */ `
  mutation AgentSubmit($in: SubmitTasksInput!) {
    submitTasks(input: $in) { batchId items { key task { id } error { code message } } }
  }`;

const FOLLOW = /* GraphQL */ `
  subscription AgentFollow($b: ID!, $after: Int64) {
    taskEventFeed(filter: {batchId: $b}, after: $after) { events lastSeq }
  }`;

const RESULTS = /* GraphQL */ `
  query AgentResults($id: ID!) {
    batch(id: $id) { tasks(first: 10) { nodes { id state result error } } }
  }`;

interface GraphQLError {
  message: string;
  extensions?: { code?: string };
}

/** Runs a query or mutation over HTTP; GraphQL errors are thrown. */
async function gql<T, V extends Record<string, unknown> = Record<string, never>>(query: string, variables?: V): Promise<T> {
  const res = await fetch(endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...auth },
    body: JSON.stringify({ query, variables: variables ?? {} }),
  });
  const body = (await res.json()) as { data?: T; errors?: GraphQLError[] };
  if (body.errors?.length) {
    const e = body.errors[0]!;
    throw new Error(`${e.extensions?.code ?? 'ERROR'}: ${e.message}`);
  }
  return body.data as T;
}

/** The batch: four browser tasks in one session, naming each other by key. */
function dag(session: string): G.BatchItemInput[] {
  const task = (action: G.ActionInput, ...dependsOn: string[]): G.SubmitTaskInput => ({
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

/** One element of taskEventFeed.events: JSON, with TaskEvent's fields. */
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
  const { stats } = await gql<G.AgentStatsQuery>(STATS);

  // 2. Submit the DAG as one batch.
  const session = `${agentId}-${Date.now()}`;
  const { submitTasks } = await gql<G.AgentSubmitMutation, G.AgentSubmitMutationVariables>(SUBMIT, {
    in: { items: dag(session) },
  });
  const keyOf = new Map<string, string>();
  for (const it of submitTasks.items) {
    if (it.error || !it.task) throw new Error(`item ${it.key} refused: ${it.error?.code}: ${it.error?.message}`);
    const key = it.key ?? it.task.id; // every item of dag() has a key
    keyOf.set(it.task.id, key);
    console.log(`submitted ${key.padEnd(5)} ${it.task.id}`);
  }
  const batchId = submitTasks.batchId;
  if (!batchId) throw new Error('the server made no batch');
  console.log(`batch ${batchId}: following it live`);

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
      const variables: G.AgentFollowSubscriptionVariables = { b: batchId, after };
      const events = client.iterate<G.AgentFollowSubscription>({ query: FOLLOW, variables });
      for await (const msg of events) {
        if (msg.errors?.length) throw new Error(msg.errors[0]!.message);
        const feed = msg.data!.taskEventFeed;
        for (const e of feed.events as FeedEvent[]) {
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
  const { batch } = await gql<G.AgentResultsQuery, G.AgentResultsQueryVariables>(RESULTS, { id: batchId });
  if (!batch) throw new Error(`batch ${batchId} not found`);
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
