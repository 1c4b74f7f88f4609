// The server and resolvers of the test schema.

package echoserver

import (
	"context"
	"net/http"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/transport"
)

// authorizationKey keys the HTTP Authorization header in a request context.
type authorizationKey struct{}

// New returns the GraphQL handler: HTTP POST and GET, graphql-transport-ws
// (and graphql-ws) over WebSocket, and introspection.
func New() http.Handler {
	srv := handler.New(NewExecutableSchema(Config{Resolvers: resolver{}}))
	srv.AddTransport(&transport.Websocket{})
	srv.AddTransport(transport.POST{})
	srv.AddTransport(transport.GET{})
	srv.Use(extension.Introspection{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), authorizationKey{}, r.Header.Get("Authorization"))
		srv.ServeHTTP(w, r.WithContext(ctx))
	})
}

type resolver struct{}

func (resolver) Query() QueryResolver               { return queryResolver{} }
func (resolver) Subscription() SubscriptionResolver { return subscriptionResolver{} }

type queryResolver struct{}

func (queryResolver) Hello(context.Context) (string, error) { return "world", nil }

func (queryResolver) Authorization(ctx context.Context) (*string, error) {
	auth, _ := ctx.Value(authorizationKey{}).(string)
	return nonEmpty(auth), nil
}

type subscriptionResolver struct{}

func (subscriptionResolver) Count(ctx context.Context, to int) (<-chan int, error) {
	ch := make(chan int)
	go func() {
		defer close(ch)
		for i := 1; i <= to; i++ {
			select {
			case ch <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

func (subscriptionResolver) Authorization(ctx context.Context) (<-chan *string, error) {
	ch := make(chan *string, 1)
	ch <- nonEmpty(transport.GetInitPayload(ctx).Authorization())
	close(ch)
	return ch, nil
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
