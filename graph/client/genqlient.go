package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/Khan/genqlient/graphql"
)

var _ graphql.Client = (*Client)(nil)

// MakeRequest sends an operation of a client that genqlient generated from
// .graphql files (it implements graphql.Client of
// github.com/Khan/genqlient/graphql), so generated code shares this client's
// endpoint, headers and errors: GraphQL errors come back as Errors, after
// the response's data is filled with whatever data there was, and an answer
// that is not a GraphQL response is a *StatusError. The response's
// extensions are resp.Extensions.
func (c *Client) MakeRequest(ctx context.Context, req *graphql.Request, resp *graphql.Response) error {
	if err := checkUTF8(req.Query, req.Variables); err != nil {
		return fmt.Errorf("%s: %w", req.OpName, err)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode request %s: %w", req.OpName, err)
	}
	res, _, err := c.RawBody(ctx, body)
	if err != nil {
		return err
	}
	if resp.Data != nil && len(res.Data) > 0 && string(res.Data) != "null" {
		if err := json.Unmarshal(res.Data, resp.Data); err != nil {
			return fmt.Errorf("decode data of %s: %w", req.OpName, err)
		}
	}
	resp.Extensions = res.Extensions
	if len(res.Errors) > 0 {
		return res.Errors
	}
	return nil
}
