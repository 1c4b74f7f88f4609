// The dashboard's only way to the server: the public GraphQL API. Queries
// and mutations go by HTTP POST; subscriptions over one WebSocket with the
// graphql-transport-ws protocol (npm graphql-ws). The token, when set, goes
// as `Authorization: Bearer …` on HTTP and in the connection_init payload
// (browsers cannot set headers on a WebSocket).
//
// Subscriptions are resilient: when the socket drops, each one is started
// again after a backoff with variables computed afresh, so the event feed
// resumes with `after: <last seq seen>` and misses nothing.

import { createClient, type Client } from 'graphql-ws/client';

/** One GraphQL error as the server sends it. */
export interface GraphQLError {
  message: string;
  path?: (string | number)[];
  extensions?: { code?: string; field?: string; [k: string]: unknown };
}

/** An error answer of the API; `code` is `extensions.code` (or HTTP/NETWORK). */
export class APIError extends Error {
  readonly code: string;
  readonly errors: GraphQLError[];
  constructor(code: string, message: string, errors: GraphQLError[] = []) {
    super(code ? `${code}: ${message}` : message);
    this.code = code;
    this.errors = errors;
  }
  static from(errors: GraphQLError[]): APIError {
    const first = errors[0] ?? { message: 'unknown error' };
    const more = errors.length > 1 ? ` (and ${errors.length - 1} more)` : '';
    return new APIError(first.extensions?.code ?? '', first.message + more, errors);
  }
}

/** The state of the subscription socket, shown in the header. */
export type Link = 'connecting' | 'live' | 'retrying' | 'unauthorized';

type Vars = Record<string, unknown>;

/** What a resilient subscription needs. */
export interface SubscriptionSpec<T> {
  query: string;
  /** Called before every (re)start: e.g. `after` = the last seq seen. */
  variables: () => Vars;
  next: (data: T) => void;
  /** A GraphQL error answer (not a dropped socket): shown, then retried. */
  error?: (err: APIError) => void;
  /** The stream ended by itself (e.g. task(id) at a terminal state): not restarted. */
  complete?: () => void;
}

interface Running {
  spec: SubscriptionSpec<any>;
  stop: (() => void) | null;
  timer: number;
  attempt: number;
  stopped: boolean;
  /** The run whose callbacks count; older runs' late callbacks are ignored. */
  current: object | null;
}

export class API {
  private token = '';
  private client: Client | null = null;
  private readonly running = new Set<Running>();
  private link: Link = 'connecting';
  /** Called when the socket's state changes. */
  onLink: (l: Link) => void = () => {};

  constructor(
    private readonly httpURL: string,
    private readonly wsURL: string,
  ) {}

  /** Sets the bearer token and reconnects every subscription with it. */
  setToken(token: string): void {
    if (token === this.token) return;
    this.token = token;
    this.reconnect();
  }

  private headers(): Record<string, string> {
    return this.token ? { Authorization: `Bearer ${this.token}` } : {};
  }

  /** Runs a query or mutation; GraphQL errors reject with an APIError. */
  async request<T>(query: string, variables: Vars = {}): Promise<T> {
    let res: Response;
    try {
      res = await fetch(this.httpURL, {
        method: 'POST',
        credentials: 'same-origin',
        headers: {
          'content-type': 'application/json',
          accept: 'application/graphql-response+json, application/json;q=0.9',
          ...this.headers(),
        },
        body: JSON.stringify({ query, variables }),
      });
    } catch (err) {
      throw new APIError('NETWORK', err instanceof Error ? err.message : String(err));
    }
    let body: { data?: T; errors?: GraphQLError[] };
    try {
      body = (await res.json()) as typeof body;
    } catch {
      throw new APIError(`HTTP_${res.status}`, res.statusText || 'not a GraphQL response');
    }
    if (body.errors && body.errors.length > 0) throw APIError.from(body.errors);
    if (body.data === undefined || body.data === null) throw new APIError(`HTTP_${res.status}`, 'no data');
    return body.data;
  }

  /** Starts a resilient subscription; the returned function ends it. */
  subscribe<T>(spec: SubscriptionSpec<T>): () => void {
    const r: Running = { spec, stop: null, timer: 0, attempt: 0, stopped: false, current: null };
    this.running.add(r);
    this.start(r);
    return () => {
      r.stopped = true;
      r.current = null;
      window.clearTimeout(r.timer);
      r.stop?.();
      this.running.delete(r);
    };
  }

  private ws(): Client {
    if (this.client) return this.client;
    const client = createClient({
      url: this.wsURL,
      connectionParams: () => this.headers(),
      lazy: true,
      lazyCloseTimeout: 1000,
      retryAttempts: 0, // each subscription restarts itself, with fresh variables
      on: {
        connecting: () => this.setLink(this.link === 'live' ? 'retrying' : this.link),
        connected: () => this.setLink('live'),
        closed: (ev: unknown) => {
          if (client !== this.client) return;
          const code = (ev as { code?: number } | undefined)?.code;
          // 4401/4403: the server refused the connection_init payload.
          this.setLink(code === 4401 || code === 4403 ? 'unauthorized' : 'retrying');
        },
      },
    });
    this.client = client;
    return client;
  }

  private setLink(l: Link): void {
    if (l === this.link) return;
    this.link = l;
    this.onLink(l);
  }

  private start(r: Running): void {
    if (r.stopped) return;
    const mine = {};
    r.current = mine;
    const live = () => r.current === mine && !r.stopped;
    const again = () => {
      if (!live()) return;
      r.current = null;
      r.stop = null;
      // 0.25 s, 0.5 s, 1 s … 5 s, so a restarting server is found quickly
      // and a dead one is not hammered.
      const delay = Math.min(5000, 250 * 2 ** Math.min(r.attempt, 5));
      r.attempt++;
      r.timer = window.setTimeout(() => this.start(r), delay);
    };
    r.stop = this.ws().subscribe<any>(
      { query: r.spec.query, variables: r.spec.variables() },
      {
        next: (res) => {
          if (!live()) return;
          if (res.errors && res.errors.length > 0) {
            const err = APIError.from(res.errors as GraphQLError[]);
            if (err.code === 'UNAUTHENTICATED' || err.code === 'FORBIDDEN') this.setLink('unauthorized');
            r.spec.error?.(err);
            return;
          }
          r.attempt = 0;
          if (res.data) r.spec.next(res.data);
        },
        error: (err: unknown) => {
          if (!live()) return;
          if (Array.isArray(err)) r.spec.error?.(APIError.from(err as GraphQLError[]));
          again();
        },
        complete: () => {
          if (!live()) return;
          if (r.spec.complete) {
            r.current = null;
            r.spec.complete();
            return;
          }
          again(); // a stream that should never end did: the server went away
        },
      },
    );
  }

  /** Drops the socket and starts every subscription again (after a token change). */
  reconnect(): void {
    const old = this.client;
    this.client = null;
    for (const r of this.running) {
      window.clearTimeout(r.timer);
      r.current = null;
      r.stop = null;
      r.attempt = 0;
    }
    old?.dispose();
    this.setLink('connecting');
    for (const r of this.running) this.start(r);
  }
}
